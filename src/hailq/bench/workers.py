"""Worker figures for ``hailq bench``: real ``hailq worker`` processes, measured from outside.

- *drain*: the queue is filled first, with no worker running; then the workers
  start on the full queue, every handler waiting at a gate
  (``hailq.bench.handlers:noop_after_go``) until the benchmark opens it; the
  clock runs from that moment until ``queue.stats()`` shows the queue empty and
  every message acked. One process of 8 threads drains, in turns, a queue filled
  by ``send_many`` (batches of 1,000) and one filled by as many single ``send``
  calls, one transaction each, as producers fill a queue; the second figure
  stands beside the first (the ratio single ÷ send_many). Then 2 processes of 4
  threads drain a queue filled by ``send_many``.
- *enqueue→handler start*: an idle worker (8 threads); messages are sent one at
  a time, 20–30 ms apart; the handler (``hailq.bench.handlers:record_start``)
  writes the wall-clock time it started; the figure is that time minus the time
  ``send()`` returned, as p50 and p99.
- *idle CPU*: utime+stime of that same worker from ``/proc/PID/stat`` over a few
  seconds of idleness, as a percentage of one CPU.

None of these has a raw-driver baseline. ``WorkerFigure.raw`` holds the peer
figure (drain rates: the rate of a comparable library quoted in the issue), the
target (latency, CPU) or the send_many-filled drain (``FillFigure``), and
``baseline`` says which; a name ends in ``(vs peer)``, ``(vs target)`` or
``(vs send_many fill)`` so the table reads right.
"""

from __future__ import annotations

import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hailq
from hailq.bench.processes import QUEUE, WorkerProcesses
from hailq.bench.runner import Figure, analyze, vacuum
from hailq.url import parse_url

GATED_NOOP = "hailq.bench.handlers:noop_after_go"
RECORD_START = "hailq.bench.handlers:record_start"

PEER_RATE = {"postgresql": 2_900.0, "sqlite": 2_000.0}
"""Drain rates of a comparable library's workers, from the issue (msgs/s)."""
TARGET_RATE = 6_000.0
# Send -> handler start. PostgreSQL's are the storage-core issue's (p50 1 ms, p99 3 ms,
# with no NOTIFY per send while no worker waits); none is given for SQLite's p99.
TARGET_P50_MS = {"postgresql": 1.0, "sqlite": 10.0}
TARGET_P99_MS = {"postgresql": 3.0}
TARGET_IDLE_CPU = 2.0  # percent of one CPU


@dataclass
class WorkerFigure(Figure):
    """A worker figure. ``raw`` is not a raw-driver run but ``baseline``: "peer", "target"
    or "none" (then ``raw`` is 0). For rates a ratio above 1 beats the peer; for "ms" and
    "%" figures a ratio up to 1 meets the target."""

    baseline: str = "target"

    @property
    def ok(self) -> bool | None:
        """Whether the figure meets its target (None when there is none)."""
        if self.unit == "msgs/s":
            return self.hailq >= TARGET_RATE
        if self.baseline != "target":
            return None
        return self.hailq <= self.raw


def backend_of(url: str) -> str:
    return "sqlite" if parse_url(url).scheme == "sqlite" else "postgresql"


# -- the queue ---------------------------------------------------------------------------


def _fresh_queue(broker: hailq.Broker, url: str) -> hailq.Queue:
    queue = broker.queue(QUEUE, lease=60)
    queue.purge(dead=False)
    queue.purge(dead=True)
    vacuum(url)
    return queue


def wait_drained(queue: hailq.Queue, acked_before: int, n: int, *, timeout: float,
                 interval: float = 0.05) -> float:
    """Poll stats until nothing is waiting or leased and ``n`` more acks were counted;
    return the ``time.perf_counter()`` at which that was seen.

    ``stats()`` counts rows (about 30 ms at 20,000 on a small machine), so while the
    backlog is large the pause grows to backlog / 20,000 s (at most 0.25 s): even at
    20,000 msgs/s the queue cannot empty during such a pause, so the end is still seen
    within ``interval``, and the poller does not load the database it measures.
    """
    deadline = time.monotonic() + timeout
    while True:
        s = queue.stats()
        left = s.ready + s.scheduled + s.in_flight + s.blocked
        if left == 0 and s.acked - acked_before >= n:
            return time.perf_counter()
        if time.monotonic() > deadline:
            raise RuntimeError(f"queue not drained after {timeout:g} s: {s}")
        time.sleep(max(interval, min(0.25, left / 20_000)))


# -- drain -------------------------------------------------------------------------------

FILLS = ("send_many", "single")
FILL_BATCH = 1_000  # messages per send_many of a batch fill
PRODUCERS = {"postgresql": 4, "sqlite": 1}
"""Producer threads of a single-send fill. On PostgreSQL each send waits for its own
commit to be flushed, and concurrent commits share a flush: 4 threads fill about 1.4×
as fast as one here. On SQLite sends take turns on one file lock, and more threads
only fill more slowly."""


@dataclass
class DrainRun:
    rate: float  # msgs/s from the go to the last ack seen
    fill_seconds: float  # how long the fill took, before any worker started
    acked: int


def fill_queue(url: str, n: int, body: dict[str, Any], *, fill: str, producers: int = 1) -> float:
    """Send ``n`` copies of ``body`` to the bench queue; return the seconds it took.

    ``fill="send_many"``: ``send_many`` calls of ``FILL_BATCH`` messages, one
    transaction each. ``fill="single"``: ``n`` calls of ``send``, one transaction
    each, from ``producers`` threads with a broker each, as separate producers fill
    a queue.
    """
    def produce(count: int) -> None:
        with hailq.connect(url) as broker:
            queue = broker.queue(QUEUE, lease=60)
            if fill == "send_many":
                for start in range(0, count, FILL_BATCH):
                    queue.send_many([body] * min(FILL_BATCH, count - start))
            else:
                for _ in range(count):
                    queue.send(body)

    if fill not in FILLS:
        raise ValueError(f"fill must be one of {', '.join(FILLS)}, got {fill!r}")
    threads = producers if fill == "single" else 1
    shares = [n // threads + (1 if i < n % threads else 0) for i in range(threads)]
    started = time.perf_counter()
    with ThreadPoolExecutor(threads, thread_name_prefix="hailq-bench-producer") as pool:
        for done in [pool.submit(produce, share) for share in shares]:
            done.result()  # a producer's error, raised here
    return time.perf_counter() - started


def drain_once(url: str, n: int, *, procs: int, concurrency: int, log_dir: Path,
               fill: str = "send_many", producers: int = 1, timeout: float | None = None,
               poll: float = 0.05, settle: float = 0.5) -> DrainRun:
    """One drain of ``n`` messages, filled as ``fill`` says (see ``fill_queue``), by
    ``procs`` worker processes of ``concurrency`` threads.

    The queue is filled before any worker runs. The workers then start on the full
    queue, each handler waiting at a gate (``handlers.noop_after_go``) until the
    benchmark opens it: the clock runs from that moment until ``stats()`` shows the
    queue empty and every message acked, so neither the fill nor the workers' start
    is in the figure.
    """
    go = log_dir / f"go-{time.time_ns()}"
    body = {"go": str(go)}
    with hailq.connect(url) as broker:
        queue = _fresh_queue(broker, url)
        before = queue.stats().acked
        fill_seconds = fill_queue(url, n, body, fill=fill, producers=producers)
        analyze(url)  # statistics as autovacuum gathers them after a fill (not a VACUUM: below)
        with WorkerProcesses(url, GATED_NOOP, procs=procs, concurrency=concurrency,
                             log_dir=log_dir):
            # The threads take their first messages and wait at the gate. Nothing else
            # reads the queue before the go: on PostgreSQL the first reader of a row pays
            # for looking up whether its transaction committed, and that belongs to the
            # drain.
            time.sleep(settle)
            go.touch()
            t0 = time.perf_counter()
            t1 = wait_drained(queue, before, n, timeout=timeout or max(60.0, n / 200),
                              interval=poll)
            acked = queue.stats().acked - before
    return DrainRun(n / (t1 - t0), fill_seconds, acked)


def _shape(procs: int, concurrency: int) -> str:
    return (f"1 process × {concurrency} threads" if procs == 1
            else f"{procs} processes × {concurrency} threads")


def bench_drain(url: str, runs: int, n: int, *, procs: int, concurrency: int,
                log_dir: Path) -> WorkerFigure:
    """The drain of a queue filled by ``send_many``, beside the peer's rate."""
    results = [drain_once(url, n, procs=procs, concurrency=concurrency, log_dir=log_dir)
               for _ in range(runs)]
    rates = [r.rate for r in results]
    return WorkerFigure(f"worker drain, {_shape(procs, concurrency)} (vs peer)", "msgs/s",
                        statistics.median(rates), PEER_RATE[backend_of(url)], rates,
                        baseline="peer")


@dataclass
class FillFigure(WorkerFigure):
    """The drain of a queue filled by single sends (``hailq``) beside the same drain of
    one filled by ``send_many`` (``raw``), measured in turns; ``ratio`` is single ÷
    send_many, the median of each turn's."""

    messages: int = 0
    producers: int = 1  # threads of the single-send fill
    fill_seconds: dict[str, float] = field(default_factory=dict)  # medians, by fill

    def as_json(self) -> dict[str, Any]:
        """The figure's fields, with the two drains and their ratio under plain names."""
        return super().as_json() | {"single_send_fill": self.hailq,
                                    "send_many_fill": self.raw,
                                    "single_vs_send_many": self.ratio}


def bench_drain_fills(url: str, runs: int, n: int, *, concurrency: int, log_dir: Path,
                      producers: int) -> list[WorkerFigure]:
    """1 process × ``concurrency`` threads draining ``n`` messages after each fill, in
    turns: the send_many drain beside the peer's rate, then the single-send drain
    beside the send_many one."""
    batch: list[DrainRun] = []
    single: list[DrainRun] = []
    for _ in range(runs):
        batch.append(drain_once(url, n, procs=1, concurrency=concurrency, log_dir=log_dir))
        single.append(drain_once(url, n, procs=1, concurrency=concurrency, log_dir=log_dir,
                                 fill="single", producers=producers))
    shape = _shape(1, concurrency)
    batch_rates, single_rates = [r.rate for r in batch], [r.rate for r in single]
    return [
        WorkerFigure(f"worker drain, {shape}, send_many fill (vs peer)", "msgs/s",
                     statistics.median(batch_rates), PEER_RATE[backend_of(url)],
                     batch_rates, baseline="peer"),
        FillFigure(f"worker drain, {shape}, single-send fill (vs send_many fill)", "msgs/s",
                   statistics.median(single_rates), statistics.median(batch_rates),
                   single_rates, batch_rates, baseline="send_many fill", messages=n,
                   producers=producers,
                   fill_seconds={"send_many": statistics.median(r.fill_seconds for r in batch),
                                 "single": statistics.median(r.fill_seconds for r in single)}),
    ]


# -- latency and idle CPU ----------------------------------------------------------------


@dataclass
class LatencyRun:
    delays_ms: list[float]  # handler start minus send() return, per message
    idle_cpu: float  # percent of one CPU

    @property
    def p50(self) -> float:
        return percentile(self.delays_ms, 50)

    @property
    def p99(self) -> float:
        return percentile(self.delays_ms, 99)


def percentile(values: Sequence[float], p: float) -> float:
    """The ``p``-th percentile, linear between closest ranks."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no values")
    rank = (len(ordered) - 1) * p / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def cpu_seconds(pid: int) -> float:
    """utime + stime of process ``pid`` (all its threads), from /proc/PID/stat."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2:].split()  # the name may hold spaces
    # fields[0] is field 3 (state); utime and stime are fields 14 and 15.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def idle_cpu(pid: int, seconds: float) -> float:
    """CPU use of ``pid`` over ``seconds`` of wall time, as a percentage of one CPU."""
    before, start = cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    used, wall = cpu_seconds(pid) - before, time.monotonic() - start
    return 100.0 * used / wall


def _read_starts(path: Path) -> dict[str, float]:
    starts: dict[str, float] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 2:
                starts[parts[0]] = float(parts[1])
    return starts


def latency_once(url: str, samples: int, *, log_dir: Path, idle_seconds: float = 5.0,
                 gap: tuple[float, float] = (0.020, 0.030), settle: float = 1.0,
                 timeout: float = 60.0) -> LatencyRun:
    """Send ``samples`` messages one at a time to an idle worker of 8 threads; then
    measure that worker's CPU over ``idle_seconds`` of idleness."""
    out = log_dir / f"starts-{time.time_ns()}.txt"
    with hailq.connect(url) as broker:
        queue = _fresh_queue(broker, url)
        with WorkerProcesses(url, RECORD_START, procs=1, concurrency=8,
                             log_dir=log_dir) as workers:
            time.sleep(settle)  # let it fall into its idle wait
            before = queue.stats().acked
            sent: dict[str, float] = {}
            body = {"out": str(out)}
            for _ in range(samples):
                message_id = queue.send(body)
                sent[message_id] = time.time()
                time.sleep(random.uniform(*gap))
            deadline = time.monotonic() + timeout
            while len(starts := _read_starts(out)) < samples:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"only {len(starts)} of {samples} handlers started "
                                       f"within {timeout:g} s")
                time.sleep(0.02)
            wait_drained(queue, before, samples, timeout=timeout)
            time.sleep(settle)  # the last acks and wake-ups are over
            cpu = idle_cpu(workers.pids[0], idle_seconds)
    missing = set(sent) - set(starts)
    if missing:
        raise RuntimeError(f"{len(missing)} message(s) never reached the handler")
    return LatencyRun([(starts[i] - sent[i]) * 1000 for i in sent], cpu)


def bench_latency_cpu(url: str, runs: int, samples: int, *, log_dir: Path,
                      idle_seconds: float = 5.0) -> list[WorkerFigure]:
    results = [latency_once(url, samples, log_dir=log_dir, idle_seconds=idle_seconds)
               for _ in range(runs)]
    backend = backend_of(url)
    p50s = [r.p50 for r in results]
    p99s = [r.p99 for r in results]
    cpus = [r.idle_cpu for r in results]
    p99_target = TARGET_P99_MS.get(backend)
    return [
        WorkerFigure("send→handler start p50, idle worker (vs target)", "ms",
                     statistics.median(p50s), TARGET_P50_MS[backend], p50s),
        WorkerFigure("send→handler start p99, idle worker " + (
            "(vs target)" if p99_target else "(no target)"), "ms",
                     statistics.median(p99s), p99_target or 0.0, p99s,
                     baseline="target" if p99_target else "none"),
        WorkerFigure(f"idle worker CPU over {idle_seconds:g} s (vs target)", "%",
                     statistics.median(cpus), TARGET_IDLE_CPU, cpus),
    ]


# -- all of it ---------------------------------------------------------------------------


def bench_workers(url: str, runs: int, quick: bool,
                  say: Callable[[str], None] = lambda text: None, *,
                  n: int | None = None, samples: int | None = None,
                  idle_seconds: float = 5.0, producers: int | None = None,
                  ) -> list[WorkerFigure]:
    """Every worker figure of one backend (medians of ``runs`` runs), in print order.

    ``n`` (drain size, the same for every fill) and ``samples`` (latency messages)
    default to 20,000 and 200, or 5,000 and 50 with ``quick``; ``producers`` (threads
    of the single-send fill) to ``PRODUCERS`` of the backend. Worker logs, the gate
    files and the handlers' results go to a temporary folder of their own (not the
    SQLite database's folder, whose writes would wake the workers).
    """
    n = n or (5_000 if quick else 20_000)
    samples = samples or (50 if quick else 200)
    producers = producers or PRODUCERS[backend_of(url)]
    figures: list[WorkerFigure] = []
    with tempfile.TemporaryDirectory(prefix="hailq-bench-workers-") as tmp:
        log_dir = Path(tmp)
        say(f"worker drain of {n:,}, 1 process × 8 threads, after a send_many fill and "
            f"after {n:,} single sends from {producers} producer thread(s), in turns")
        figures.extend(bench_drain_fills(url, runs, n, concurrency=8, log_dir=log_dir,
                                         producers=producers))
        say(f"worker drain of {n:,}, 2 process(es) × 4 threads")
        figures.append(bench_drain(url, runs, n, procs=2, concurrency=4, log_dir=log_dir))
        say(f"send→handler start latency ({samples} messages) and idle worker CPU")
        figures.extend(bench_latency_cpu(url, runs, samples, log_dir=log_dir,
                                         idle_seconds=idle_seconds))
    return figures


def render_workers(backend: str, figures: Sequence[Figure]) -> str:
    """The worker figures as a table of their own: figure, hailq, its baseline (peer,
    target or the other fill), ratio; under it, how the drained queues were filled."""
    width = max([52, *(len(f.name) + 2 for f in figures)])
    lines = [f"\n{backend}: workers",
             f"{'figure':<{width}}{'hailq':>12}{'baseline':>14}{'ratio':>8}"]
    for f in figures:
        if f.unit == "msgs/s":
            value, base = f"{f.hailq:>12,.0f}", f"{f.raw:>14,.0f}"
        elif f.unit == "%":
            value, base = f"{f.hailq:>11.2f}%", f"{f.raw:>13.2f}%"
        else:
            value, base = f"{f.hailq:>9.3f} ms", f"{f.raw:>11.3f} ms"
        ratio = f"{f.ratio:>8.2f}"
        if isinstance(f, WorkerFigure) and f.baseline == "none":
            base, ratio = f"{'-':>14}", f"{'-':>8}"  # nothing to compare with
        lines.append(f"{f.name:<{width}}{value}{base}{ratio}")
    for f in figures:
        if isinstance(f, FillFigure):
            lines.append(
                f"  each drain: {f.messages:,} messages sent before the workers start, by "
                f"send_many of {FILL_BATCH:,} ({f.fill_seconds.get('send_many', 0):.1f} s) "
                f"or by single sends from {f.producers} producer thread(s) "
                f"({f.fill_seconds.get('single', 0):.1f} s)")
    return "\n".join(lines)
