"""``hailq bench --only figures``: what counting every consumer's figures costs (rule 36).

One consumer process drains the same backlog through the API (``receive`` then
``ack_many``), once with the broker's figures on (every claim's wait and every ack's
handler time counted in memory, written once a second) and once with
``hailq.connect(url, figures=False)``, in alternating order within each run so that a
neighbour's load falls on both alike. The ratio is with ÷ without: 1.0 costs nothing.
Each drain is also counted per second of its process's CPU time (every thread, the
figures' flusher included): on a machine shared with other work, whose load moves the
wall-clock rates of one run by a third, that rate moves far less.
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
    start, cpu = time.perf_counter(), time.process_time()
    done = take_until_empty(lambda: queue.receive(batch),
                            (lambda got: got[0].ack()) if batch == 1 else queue.ack_many)
    out.put((done / (time.perf_counter() - start), done / (time.process_time() - cpu)))


def _one(url: str, batch: int, figures: bool) -> tuple[float, float]:
    """One drain in a process of its own: messages per second of wall-clock time and
    per second of the process's CPU time."""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    process = ctx.Process(target=_drain, args=(url, batch, figures, out))
    process.start()
    wall, cpu = out.get()
    process.join()
    return float(wall), float(cpu)


def bench_figures(url: str, runs: int, n: int) -> list[Figure]:
    """A drain of ``n`` messages with and without figures, per batch size (1 and 10)."""
    queue = reset_hailq(url)
    found = []
    for batch in (1, 10):
        count = n // 4 if batch == 1 else n
        with_: list[tuple[float, float]] = []
        without: list[tuple[float, float]] = []
        for run in range(runs):
            for figures in ((True, False) if run % 2 == 0 else (False, True)):
                _refill(queue, url, count)
                (with_ if figures else without).append(_one(url, batch, figures))
        found += pair(f"drain with figures (vs without), batch {batch}", with_, without)
    return found


def pair(name: str, on: list[tuple[float, float]], off: list[tuple[float, float]],
         ) -> list[Figure]:
    """Two figures of drains measured in the same turns: per wall-clock second, and per
    second of CPU time (named ``..., per CPU second``)."""
    found = []
    for i, suffix in ((0, ""), (1, ", per CPU second")):
        a, b = [r[i] for r in on], [r[i] for r in off]
        found.append(Figure(name + suffix, "msgs/s", statistics.median(a),
                            statistics.median(b), a, b))
    return found
