"""A drain with a setting on and with it off, the benchmark of what one feature costs
(``--only figures``, ``--only history``).

One consumer process drains the same backlog through the API (``receive`` then ack or
``ack_many``), per batch size (1 and 10), once with the setting on and once off, in
alternating order within each run so that a neighbour's load falls on both alike. The
ratio is on ÷ off: 1.0 costs nothing. Each drain is also counted per second of the
consumer process's CPU time (every thread: ``..., per CPU second``), which a shared
machine's load moves far less than wall-clock rates.
"""

from __future__ import annotations

import multiprocessing as mp
import statistics
import time
from collections.abc import Callable
from typing import Any

import hailq
from hailq.backends.base_parts import HistorySettleParams
from hailq.bench.runner import QUEUE, Figure, _refill, take_until_empty


def _drain(url: str, batch: int, figures: bool, out: Any) -> None:
    broker = hailq.connect(url, figures=figures)
    queue = broker.queue(QUEUE, lease=60)
    start, cpu = time.perf_counter(), time.process_time()
    done = take_until_empty(lambda: queue.receive(batch),
                            (lambda got: got[0].ack()) if batch == 1 else queue.ack_many)
    # History the acks wrote that upkeep has not moved in yet (SQLite) is the drain's
    # cost too: moved before the clock stops.
    settle = HistorySettleParams()
    while broker.backend.history_settle(settle) >= settle.batch:
        pass
    out.put((done / (time.perf_counter() - start), done / (time.process_time() - cpu)))


def drain_rate(url: str, batch: int, figures: bool = True) -> tuple[float, float]:
    """Messages per second of wall-clock time and per second of the process's CPU time,
    of one drain of ``QUEUE`` in a process of its own."""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    process = ctx.Process(target=_drain, args=(url, batch, figures, out))
    process.start()
    wall, cpu = out.get()
    process.join()
    return float(wall), float(cpu)


def paired_drains(queue: hailq.Queue, url: str, runs: int, n: int, what: str,
                  arrange: Callable[[bool], None] = lambda on: None,
                  figures: Callable[[bool], bool] = lambda on: True) -> list[Figure]:
    """``drain with {what}, batch N`` for batches of 1 (``n // 4`` messages) and 10
    (``n``): ``arrange(on)`` sets a turn up before its backlog is refilled;
    ``figures(on)`` says whether the turn's consumer counts figures."""
    found = []
    for batch in (1, 10):
        count = n // 4 if batch == 1 else n
        rates: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
        for run in range(runs):
            for on in ((True, False) if run % 2 == 0 else (False, True)):
                arrange(on)
                _refill(queue, url, count)
                rates[on].append(drain_rate(url, batch, figures(on)))
        for i, suffix in ((0, ""), (1, ", per CPU second")):
            on_, off = [r[i] for r in rates[True]], [r[i] for r in rates[False]]
            found.append(Figure(f"drain with {what}, batch {batch}{suffix}", "msgs/s",
                                statistics.median(on_), statistics.median(off), on_, off))
    return found
