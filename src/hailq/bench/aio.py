"""``hailq bench``'s async figures: a drain through ``hailq.aio`` beside the same drain
through the sync API, in the same run and process (rule 37's cost).

The baseline is the sync API itself: the ratio is async msgs/s ÷ sync msgs/s, so
0.83 means the async cycle costs 1.2 times the sync one. Each run refills the queue
before each side; one consumer, receive then ``ack_many`` of what it got."""

from __future__ import annotations

import asyncio
import statistics
import threading
import time
from collections.abc import Awaitable
from typing import TypeVar

import hailq
import hailq.aio
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


async def _drain_async(queue: hailq.aio.AsyncQueue, batch: int) -> int:
    done = 0
    while got := await queue.receive(batch):
        await queue.ack_many(got)
        done += len(got)
    return done


def bench_async(url: str, runs: int, n: int, batch: int) -> Figure:
    """Async receive+ack (``batch`` at a time) ÷ the sync cycle, medians of ``runs``."""
    filler = reset_hailq(url)
    sync = hailq.connect(url).queue(QUEUE, lease=60)
    loop = LoopThread()
    broker = loop.run(hailq.aio.connect(url))
    queue = loop.run(broker.queue(QUEUE, lease=60))
    async_rates, sync_rates = [], []
    try:
        for _ in range(runs):
            _refill(filler, url, n)
            began = time.perf_counter()
            done = take_until_empty(lambda: sync.receive(batch), sync.ack_many)
            sync_rates.append(done / (time.perf_counter() - began))
            _refill(filler, url, n)
            began = time.perf_counter()
            done = loop.run(_drain_async(queue, batch))
            async_rates.append(done / (time.perf_counter() - began))
    finally:
        loop.run(broker.close())
        loop.close()
    return Figure(f"async receive+ack, batch {batch} (vs sync)", "msgs/s",
                  statistics.median(async_rates), statistics.median(sync_rates),
                  async_rates, sync_rates)
