"""Producers that share commits (``hailq/committer.py``): 16 threads of one process each
sending single messages, and 100 coroutines doing the same through ``hailq.aio``,
against the same sends one after another on one thread and, on PostgreSQL, against a
bare insert loop on one connection; measured in turns, in the same run, so that all
of them meet the same noise."""

from __future__ import annotations

import asyncio
import statistics
import threading
import time
from collections.abc import Callable

import hailq.aio
from hailq.bench.aio import LoopThread
from hailq.bench.raw import RawPostgres
from hailq.bench.runner import QUEUE, Figure, open_raw, reset_hailq, vacuum

THREADS = 16
COROUTINES = 100
SHARED = f"send from {THREADS} threads"
AWAITED = f"send from {COROUTINES} coroutines"


def bench_shared(url: str, runs: int, n: int) -> list[Figure]:
    """``n`` single sends per turn: sequential, from 16 threads, from 100 coroutines,
    and the raw loop."""
    queue = reset_hailq(url)
    raw = open_raw(url)
    body = {"claim": 8311, "photos": 4}
    raw_body = b'{"claim":8311,"photos":4}'
    per_thread = n // THREADS
    looping = LoopThread()  # the coroutines' loop, running all along as an app's
    on_loop = looping.run
    broker = on_loop(hailq.aio.connect(url))
    awaited = on_loop(broker.queue(QUEUE))
    per_coroutine = max(1, per_thread * THREADS // COROUTINES)

    def clear() -> None:
        queue.purge(dead=False)
        vacuum(url)
        raw.reset()

    def sequential() -> None:
        for _ in range(per_thread * THREADS):
            queue.send(body)

    def threads() -> None:
        from_threads(lambda: queue.send(body), THREADS, per_thread)

    async def sending() -> None:
        for _ in range(per_coroutine):
            await awaited.send(body)

    async def coroutines() -> None:
        await asyncio.gather(*(sending() for _ in range(COROUTINES)))

    def raw_loop() -> None:
        for _ in range(per_thread * THREADS):
            raw.send_one(raw_body)

    turns: dict[str, list[float]] = {"threads": [], "coroutines": [], "sequential": [],
                                     "raw": []}
    work: dict[str, Callable[[], None]] = {
        "threads": threads, "coroutines": lambda: on_loop(coroutines()),
        "sequential": sequential}
    if isinstance(raw, RawPostgres):
        work["raw"] = raw_loop
    try:
        for _ in range(runs):
            for name, job in work.items():
                clear()
                sent = per_coroutine * COROUTINES if name == "coroutines" \
                    else per_thread * THREADS
                began = time.perf_counter()
                job()
                turns[name].append(sent / (time.perf_counter() - began))
        clear()
    finally:
        raw.close()
        on_loop(broker.close())
        looping.close()
    figures = []
    for label, key in ((SHARED, "threads"), (AWAITED, "coroutines")):
        mine = turns[key]
        figures.append(Figure(f"{label} (vs one thread)", "msgs/s", statistics.median(mine),
                              statistics.median(turns["sequential"]), mine,
                              turns["sequential"]))
        if turns["raw"]:
            figures.append(Figure(f"{label} (vs a bare insert loop)", "msgs/s",
                                  statistics.median(mine), statistics.median(turns["raw"]),
                                  mine, turns["raw"]))
    return figures


def from_threads(send: Callable[[], object], threads: int, each: int) -> None:
    """``send()`` ``each`` times in each of ``threads`` threads, which start together."""
    start = threading.Barrier(threads + 1)

    def run() -> None:
        start.wait()
        for _ in range(each):
            send()

    pool = [threading.Thread(target=run) for _ in range(threads)]
    for t in pool:
        t.start()
    start.wait()
    for t in pool:
        t.join()


def render_shared(backend: str, figures: list[Figure]) -> list[str]:
    """The section of ``hailq bench``'s report for these figures."""
    lines = [f"\n{backend}: producers that share commits",
             f"{'figure (msgs/s, median)':<48}{'shared':>12}{'baseline':>12}{'ratio':>8}"]
    return lines + [f"{f.name:<48}{f.hailq:>12,.0f}{f.raw:>12,.0f}{f.ratio:>8.2f}"
                    for f in figures]
