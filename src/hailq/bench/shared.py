"""Producers that share commits (``hailq/committer.py``): 16 threads of one process each
sending single messages, against the same sends one after another on one thread and,
on PostgreSQL, against a bare insert loop on one connection; measured in turns, in
the same run, so that all three meet the same noise."""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable

from hailq.bench.raw import RawPostgres
from hailq.bench.runner import Figure, open_raw, reset_hailq, vacuum

THREADS = 16
SHARED = f"send from {THREADS} threads"


def bench_shared(url: str, runs: int, n: int) -> list[Figure]:
    """``n`` single sends per turn: sequential, from 16 threads, and the raw loop."""
    queue = reset_hailq(url)
    raw = open_raw(url)
    body = {"claim": 8311, "photos": 4}
    raw_body = b'{"claim":8311,"photos":4}'
    per_thread = n // THREADS

    def clear() -> None:
        queue.purge(dead=False)
        vacuum(url)
        raw.reset()

    def sequential() -> None:
        for _ in range(per_thread * THREADS):
            queue.send(body)

    def threads() -> None:
        start = threading.Barrier(THREADS + 1)

        def run() -> None:
            start.wait()
            for _ in range(per_thread):
                queue.send(body)

        pool = [threading.Thread(target=run) for _ in range(THREADS)]
        for t in pool:
            t.start()
        start.wait()
        for t in pool:
            t.join()

    def raw_loop() -> None:
        for _ in range(per_thread * THREADS):
            raw.send_one(raw_body)

    turns: dict[str, list[float]] = {"threads": [], "sequential": [], "raw": []}
    work: dict[str, Callable[[], None]] = {"threads": threads, "sequential": sequential}
    if isinstance(raw, RawPostgres):
        work["raw"] = raw_loop
    for _ in range(runs):
        for name, job in work.items():
            clear()
            began = time.perf_counter()
            job()
            turns[name].append(per_thread * THREADS / (time.perf_counter() - began))
    clear()
    raw.close()
    shared = turns["threads"]
    figures = [Figure(f"{SHARED} (vs one thread)", "msgs/s", statistics.median(shared),
                      statistics.median(turns["sequential"]), shared, turns["sequential"])]
    if turns["raw"]:
        figures.append(Figure(f"{SHARED} (vs a bare insert loop)", "msgs/s",
                              statistics.median(shared), statistics.median(turns["raw"]),
                              shared, turns["raw"]))
    return figures


def render_shared(backend: str, figures: list[Figure]) -> list[str]:
    """The section of ``hailq bench``'s report for these figures."""
    lines = [f"\n{backend}: producers that share commits",
             f"{'figure (msgs/s, median)':<48}{'threads':>12}{'baseline':>12}{'ratio':>8}"]
    return lines + [f"{f.name:<48}{f.hailq:>12,.0f}{f.raw:>12,.0f}{f.ratio:>8.2f}"
                    for f in figures]
