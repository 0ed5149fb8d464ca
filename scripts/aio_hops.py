#!/usr/bin/env python3
"""Where an async SQLite receive+ack cycle spends its time (``hailq.aio``).

    PYTHONPATH=src .venv/bin/python scripts/aio_hops.py [--batch 10] [--n 3000]

Each call of an async SQLite broker runs in one of the broker's threads. For every
receive and ack_many of a drain this prints the medians of: the hop from the loop to
the thread (until the call starts there), the call itself in the thread, and the hop
back (from the call's end until the awaiting coroutine resumes), beside the same calls
made synchronously on the caller's thread. ``hailq bench --only async`` gives the
ratio these add up to. Not part of ``make test``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import hailq
import hailq.aio


def _median_us(values: list[float]) -> float:
    return round(statistics.median(values) * 1e6, 1)


async def _measure(url: str, batch: int, n: int) -> None:
    broker = await hailq.aio.connect(url)
    queue = (await broker.queue("hops", lease=60)).sync
    driver = broker.driver
    there: list[float] = []
    inside: list[float] = []
    back: list[float] = []

    async def timed(fn: Callable[..., Any], *args: Any) -> Any:
        marks: dict[str, float] = {}

        def call() -> Any:
            marks["start"] = time.perf_counter()
            try:
                return fn(*args)
            finally:
                marks["end"] = time.perf_counter()

        sent = time.perf_counter()
        result = await driver.run(call)
        resumed = time.perf_counter()
        there.append(marks["start"] - sent)
        inside.append(marks["end"] - marks["start"])
        back.append(resumed - marks["end"])
        return result

    queue.send_many(list(range(n)))
    while got := await timed(queue.receive, batch):
        await timed(queue.ack_many, got)
    queue.send_many(list(range(n)))
    direct: list[float] = []
    while True:
        began = time.perf_counter()
        got = queue.receive(batch)
        direct.append(time.perf_counter() - began)
        if not got:
            break
        began = time.perf_counter()
        queue.ack_many(got)
        direct.append(time.perf_counter() - began)
    await broker.close()
    print(f"calls: {len(inside)} (batch {batch})")
    print(f"loop -> thread      {_median_us(there):8.1f} us")
    print(f"the call, in thread {_median_us(inside):8.1f} us")
    print(f"thread -> loop      {_median_us(back):8.1f} us")
    print(f"the call, sync      {_median_us(direct):8.1f} us")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--n", type=int, default=3000)
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="hailq-hops-")
    asyncio.run(_measure(f"sqlite:///{folder}/hops.db", args.batch, args.n))


if __name__ == "__main__":
    main()
