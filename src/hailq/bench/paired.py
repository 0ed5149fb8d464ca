"""A drain with a setting on and with it off, the benchmark of what one feature costs
(``--only figures``, ``--only history``).

One consumer process drains the same backlog through the API (``receive`` then ack or
``ack_many``), per batch size (1 and 10), once with the setting on and once off, in
alternating order within each run so that a neighbour's load falls on both alike. The
ratio is on ÷ off: 1.0 costs nothing.
"""

from __future__ import annotations

import multiprocessing as mp
import statistics
import time
from collections.abc import Callable
from typing import Any

import hailq
from hailq.bench.runner import QUEUE, Figure, _refill, take_until_empty


def _drain(url: str, batch: int, figures: bool, out: Any) -> None:
    queue = hailq.connect(url, figures=figures).queue(QUEUE, lease=60)
    start = time.perf_counter()
    done = take_until_empty(lambda: queue.receive(batch),
                            (lambda got: got[0].ack()) if batch == 1 else queue.ack_many)
    out.put(done / (time.perf_counter() - start))


def drain_rate(url: str, batch: int, figures: bool = True) -> float:
    """Messages per second of one drain of ``QUEUE`` in a process of its own."""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    process = ctx.Process(target=_drain, args=(url, batch, figures, out))
    process.start()
    rate = float(out.get())
    process.join()
    return rate


def paired_drains(queue: hailq.Queue, url: str, runs: int, n: int, what: str,
                  arrange: Callable[[bool], None] = lambda on: None,
                  figures: Callable[[bool], bool] = lambda on: True) -> list[Figure]:
    """``drain with {what}, batch N`` for batches of 1 (``n // 4`` messages) and 10
    (``n``): ``arrange(on)`` sets a turn up before its backlog is refilled;
    ``figures(on)`` says whether the turn's consumer counts figures."""
    found = []
    for batch in (1, 10):
        count = n // 4 if batch == 1 else n
        rates: dict[bool, list[float]] = {True: [], False: []}
        for run in range(runs):
            for on in ((True, False) if run % 2 == 0 else (False, True)):
                arrange(on)
                _refill(queue, url, count)
                rates[on].append(drain_rate(url, batch, figures(on)))
        found.append(Figure(f"drain with {what}, batch {batch}", "msgs/s",
                            statistics.median(rates[True]), statistics.median(rates[False]),
                            rates[True], rates[False]))
    return found
