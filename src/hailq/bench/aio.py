"""``hailq bench``'s async figures: a drain through ``hailq.aio`` beside the same drain
through the sync API, in the same run and process (rule 37's cost).

The baseline is the sync API itself: the ratio is async msgs/s ÷ sync msgs/s, so
0.83 means the async cycle costs 1.2 times the sync one. Each run refills the queue
before each side; one consumer, receive then ``ack_many`` of what it got. At batch 10
the same turns also drain through ``ack_and_receive`` (one call a cycle), against the
same sync baseline; on SQLite the hop of an empty call to a broker thread and back is
measured too, with what the machine's idle cores do (``idle_policy``): the hop, not
the storage code, is what an async SQLite cycle adds."""

from __future__ import annotations

import asyncio
import statistics
import threading
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import TypeVar

import hailq
import hailq.aio
from hailq.aio.drivers import ThreadDriver
from hailq.bench.runner import QUEUE, Figure, _refill, reset_hailq, take_until_empty

T = TypeVar("T")


class LoopThread:
    """An event loop that runs all along in a thread of its own, as an app's does: an
    async broker's figures are written from a thread through its loop, which a loop
    stopped between measured turns would hold up past the broker's deadline."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True,
                                        name="bench-loop")
        self._thread.start()

    def run(self, awaitable: Awaitable[T]) -> T:
        """``awaitable``'s result, awaited on the loop."""
        async def go() -> T:
            return await awaitable

        return asyncio.run_coroutine_threadsafe(go(), self.loop).result()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


HOP = "async hop to a broker thread and back"
HOPS = 2_000  # empty calls timed for the hop's median
# A KVM guest's idle vCPU polls this long before it halts (Linux's cpuidle-haltpoll);
# a halted one is woken by its host, which is what a cross-thread hop waits for.
HALT_POLL = Path("/sys/module/haltpoll/parameters/guest_halt_poll_ns")


async def _drain_async(queue: hailq.aio.AsyncQueue, batch: int) -> int:
    done = 0
    while got := await queue.receive(batch):
        await queue.ack_many(got)
        done += len(got)
    return done


async def _drain_joined(queue: hailq.aio.AsyncQueue, batch: int) -> int:
    done = 0
    got = await queue.receive(batch)
    while got:
        done += len(got)
        _, got = await queue.ack_and_receive(got, batch)
    return done


async def _hop(broker: hailq.aio.AsyncBroker) -> float:
    """The median round trip, in µs, of an empty call through the broker's threads."""
    took = []
    for _ in range(HOPS):
        began = time.perf_counter()
        await broker.driver.run(int)
        took.append(time.perf_counter() - began)
    return statistics.median(took) * 1e6


def idle_policy() -> str | None:
    """What this machine's idle cores do, where it lengthens a hop between threads: on
    a KVM guest whose halt polling is off, each hop wakes a halted vCPU."""
    try:
        polled = int(HALT_POLL.read_text())
    except (OSError, ValueError):
        return None
    if polled:
        return f"idle vCPUs poll {polled / 1000:g} µs before they halt (guest halt polling)"
    return ("idle vCPUs halt at once (guest halt polling off): each hop wakes one "
            "through the host")


def bench_async(url: str, runs: int, n: int, batch: int) -> list[Figure]:
    """Async receive+ack (``batch`` at a time) ÷ the sync cycle, medians of ``runs``;
    at batch 10 also the cycle through ``ack_and_receive``; on SQLite the hop."""
    filler = reset_hailq(url)
    sync = hailq.connect(url).queue(QUEUE, lease=60)
    loop = LoopThread()
    broker = loop.run(hailq.aio.connect(url))
    queue = loop.run(broker.queue(QUEUE, lease=60))
    drains = [_drain_async] + ([_drain_joined] if batch > 1 else [])
    rates: list[list[float]] = [[] for _ in drains]
    sync_rates = []
    try:
        for _ in range(runs):
            _refill(filler, url, n)
            began = time.perf_counter()
            done = take_until_empty(lambda: sync.receive(batch), sync.ack_many)
            sync_rates.append(done / (time.perf_counter() - began))
            for drain, rated in zip(drains, rates, strict=True):
                _refill(filler, url, n)
                began = time.perf_counter()
                done = loop.run(drain(queue, batch))
                rated.append(done / (time.perf_counter() - began))
        hop = (loop.run(_hop(broker)) if isinstance(broker.driver, ThreadDriver)
               and batch > 1 else None)
    finally:
        loop.run(broker.close())
        loop.close()
    names = [f"async receive+ack, batch {batch} (vs sync)",
             f"async ack_and_receive, batch {batch} (vs sync receive+ack)"]
    figures = [Figure(name, "msgs/s", statistics.median(rated), statistics.median(sync_rates),
                      rated, sync_rates) for name, rated in zip(names, rates, strict=False)]
    if hop is not None:
        figures.append(Figure(HOP, "µs", hop, 0.0))
    return figures
