#!/usr/bin/env python3
"""CPU per message of producers that share commits (``hailq/committer.py``).

    PYTHONPATH=src .venv/bin/python scripts/shared_cpu.py [--n 4800] [--runs 3]
        [--postgres URL] [--profile threads|coroutines]

``hailq bench --only shared`` reports wall-clock ratios against one thread's sends,
which on SQLite wait for the disk (fsync) while shared sends are bound by the CPU:
the ratio moves with the disk and the neighbours' load. The process's CPU time per
message (all its threads) moves far less, so this prints it for each way of sending
(one thread, 16 threads, 100 coroutines), with the wall rate and the messages per
shared commit. ``--profile`` runs that part under cProfile in every thread (the
committer's included) and prints the heaviest functions. Not part of ``make test``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import os
import pstats
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import hailq
import hailq.aio
from hailq.bench.aio import LoopThread
from hailq.bench.shared import COROUTINES, THREADS, from_threads

BODY = {"claim": 8311, "photos": 4}
PARTS = ("sequential", "threads", "coroutines")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=4_800, help="messages per turn")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--postgres", default=None, help="a PostgreSQL URL instead of SQLite")
    parser.add_argument("--profile", choices=PARTS)
    parser.add_argument("--part", choices=PARTS, action="append", dest="parts",
                        help="measure only this part (repeatable)")
    args = parser.parse_args()
    profiles = Profiles()
    if args.profile:
        profiles.start()
    with tempfile.TemporaryDirectory(prefix="hailq-shared-") as folder:
        url = args.postgres or f"sqlite:///{Path(folder) / 'q.db'}"
        broker = hailq.connect(url)
        queue = broker.queue("shared")
        looping = LoopThread()
        abroker = looping.run(hailq.aio.connect(url))
        aqueue = looping.run(abroker.queue("shared"))
        n = args.n

        def sequential() -> None:
            for _ in range(n):
                queue.send(BODY)

        def threads() -> None:
            from_threads(lambda: queue.send(BODY), THREADS, n // THREADS)

        async def sending() -> None:
            for _ in range(n // COROUTINES):
                await aqueue.send(BODY)

        async def gathered() -> None:
            await asyncio.gather(*(sending() for _ in range(COROUTINES)))

        work: dict[str, Callable[[], None]] = {
            "sequential": sequential, "threads": threads,
            "coroutines": lambda: looping.run(gathered())}
        if args.profile:
            profiles.run(work[args.profile])
        else:
            measure({k: v for k, v in work.items() if k in (args.parts or PARTS)}, n,
                    args.runs, queue, aqueue.sync)
        looping.run(abroker.close())
        looping.close()
        broker.close()


def measure(work: dict[str, Callable[[], None]], n: int, runs: int, queue: hailq.Queue,
            other: hailq.Queue) -> None:
    seen: dict[str, list[tuple[float, float, float, float]]] = {k: [] for k in work}
    for _ in range(runs):
        for name, job in work.items():
            queue.purge(dead=False)
            committers = [queue._committer, other._committer]
            groups = sum(c.groups for c in committers)
            before, wall = os.times(), time.perf_counter()
            job()
            after, wall = os.times(), time.perf_counter() - wall
            user, system = after.user - before.user, after.system - before.system
            grouped = sum(c.groups for c in committers) - groups
            seen[name].append((n / wall, user / n * 1e6, system / n * 1e6, grouped))
    print(f"{'part':<12}{'msgs/s':>10}{'user us/msg':>13}{'sys us/msg':>12}{'commits':>9}")
    for name, rows in seen.items():
        print(f"{name:<12}{statistics.median(r[0] for r in rows):>10,.0f}"
              f"{statistics.median(r[1] for r in rows):>13.1f}"
              f"{statistics.median(r[2] for r in rows):>12.1f}"
              f"{statistics.median(r[3] for r in rows):>9.0f}")


class Profiles:
    """A cProfile profiler in every thread started after ``start`` (the committer's, the
    event loop's, the senders'), cleared before the measured part."""

    def __init__(self) -> None:
        self.profiles: list[cProfile.Profile] = []
        self._made = threading.Lock()

    def start(self) -> None:
        threading.setprofile(self._thread_started)

    def _thread_started(self, *_: object) -> None:
        sys.setprofile(None)
        p = cProfile.Profile()
        with self._made:
            self.profiles.append(p)
        p.enable()

    def run(self, job: Callable[[], None]) -> None:
        with self._made:
            for p in self.profiles:
                p.clear()
        main_profile = cProfile.Profile()
        main_profile.enable()
        job()
        main_profile.disable()
        threading.setprofile(None)
        with self._made:
            for p in self.profiles:
                p.disable()
            stats = pstats.Stats(main_profile)
            for p in self.profiles:
                with contextlib.suppress(TypeError):  # a thread that ran nothing since
                    stats.add(p)
        stats.sort_stats("tottime").print_stats(40)


if __name__ == "__main__":
    main()
