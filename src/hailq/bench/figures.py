"""``hailq bench --only figures``: what counting every consumer's figures costs (rule 36).

One consumer process drains the same backlog through the API (``receive`` then
``ack_many``), once with the broker's figures on (every claim's wait and every ack's
handler time counted in memory, written once a second) and once with
``hailq.connect(url, figures=False)``, in alternating order within each run so that a
neighbour's load falls on both alike. The ratio is with ÷ without: 1.0 costs nothing.
"""

from __future__ import annotations

import multiprocessing as mp
import statistics
import time
from typing import Any

import hailq
from hailq.bench.runner import QUEUE, Figure, _refill, reset_hailq, take_until_empty


def _drain(url: str, batch: int, figures: bool, out: Any) -> None:
    queue = hailq.connect(url, figures=figures).queue(QUEUE, lease=60)
    start = time.perf_counter()
    done = take_until_empty(lambda: queue.receive(batch),
                            (lambda got: got[0].ack()) if batch == 1 else queue.ack_many)
    out.put(done / (time.perf_counter() - start))


def _one(url: str, batch: int, figures: bool) -> float:
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    process = ctx.Process(target=_drain, args=(url, batch, figures, out))
    process.start()
    rate = float(out.get())
    process.join()
    return rate


def bench_figures(url: str, runs: int, n: int) -> list[Figure]:
    """A drain of ``n`` messages with and without figures, per batch size (1 and 10)."""
    queue = reset_hailq(url)
    found = []
    for batch in (1, 10):
        count = n // 4 if batch == 1 else n
        with_: list[float] = []
        without: list[float] = []
        for run in range(runs):
            for figures in ((True, False) if run % 2 == 0 else (False, True)):
                _refill(queue, url, count)
                (with_ if figures else without).append(_one(url, batch, figures))
        found.append(Figure(f"drain with figures (vs without), batch {batch}", "msgs/s",
                            statistics.median(with_), statistics.median(without),
                            with_, without))
    return found
