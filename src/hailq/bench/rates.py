"""``hailq bench --only rate``: a rate limit held by several worker processes (rule 33).

Four worker processes (``hailq.Worker``, one slot each, a handler that does nothing)
consume a queue limited to 50 messages a second with more messages than they can
start. The figure is how many started per second over 20 seconds, after the first
second (the bucket's burst); the goal is 45-55/s on each backend. The highest count
in any one-second window is shown beside it.
"""

from __future__ import annotations

import multiprocessing as mp
import threading
import time
from typing import Any

import hailq
from hailq.bench.runner import Figure

QUEUE = "bench-rate"
RATE = 50
PROCESSES = 4
SECONDS = 20.0


def _worker(url: str, seconds: float, barrier: Any, out: Any) -> None:
    started: list[float] = []
    with hailq.connect(url) as broker:
        worker = hailq.Worker(broker, {QUEUE: lambda m: started.append(time.time())},
                              poll=1.0, scheduler=False)
        barrier.wait()
        threading.Timer(seconds, worker.stop).start()
        worker.run(handle_signals=False)
    out.put(started)


def bench_rate(url: str, seconds: float = SECONDS, rate: int = RATE,
               processes: int = PROCESSES) -> list[Figure]:
    """Started messages per second under ``rate``/s, and the busiest second."""
    with hailq.connect(url) as broker:
        queue = broker.queue(QUEUE, rate=f"{rate}/s")
        queue.purge()
        total = int(rate * (seconds + 2) * 1.5)
        for start in range(0, total, 1000):
            queue.send_many([{"result": i} for i in range(start, min(total, start + 1000))])
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(processes + 1)
    out = ctx.Queue()
    workers = [ctx.Process(target=_worker, args=(url, seconds + 1.5, barrier, out))
               for _ in range(processes)]
    for w in workers:
        w.start()
    barrier.wait()
    began = time.time()
    starts = sorted(t for _ in workers for t in out.get())
    for w in workers:
        w.join()
    with hailq.connect(url) as broker:
        broker.get_queue(QUEUE).purge()
    window = [t for t in starts if began + 1.0 <= t < began + 1.0 + seconds]
    per_second = len(window) / seconds
    busiest = max((sum(1 for s in window if t <= s < t + 1.0) for t in window), default=0)
    return [Figure(f"rate {rate}/s, {processes} worker processes, started/s over "
                   f"{seconds:g} s", "msgs/s", per_second, float(rate)),
            Figure(f"rate {rate}/s, busiest second", "msgs/s", float(busiest), float(rate))]
