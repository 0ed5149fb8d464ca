"""Run the benchmark cycles for one backend: hailq and the raw baseline side by side."""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

import hailq
from hailq.bench.raw import RawCycle, RawPostgres, RawSQLite
from hailq.bench.scratch import schema_of
from hailq.url import parse_url

T = TypeVar("T")

QUEUE = "bench"
WARMUP = 100  # unmeasured receive cycles after each fill


@dataclass
class Figure:
    """One measured figure: medians over runs, hailq beside the raw baseline."""

    name: str
    unit: str
    hailq: float
    raw: float
    runs: list[float] = field(default_factory=list)
    raw_runs: list[float] = field(default_factory=list)  # the baseline's, in the same turns

    @property
    def ratio(self) -> float:
        """hailq ÷ raw. Where each run has its own baseline, the median of the runs'
        ratios: a neighbour that slows one turn slows both sides of that turn, while the
        two medians may come from different turns."""
        if self.runs and len(self.runs) == len(self.raw_runs) and all(self.raw_runs):
            return statistics.median(h / r for h, r in zip(self.runs, self.raw_runs,
                                                           strict=True))
        return self.hailq / self.raw if self.raw else 0.0

    def as_json(self) -> dict[str, Any]:
        """The figure as ``hailq bench --json`` writes it: its fields and its ratio."""
        return asdict(self) | {"ratio": self.ratio}


def open_raw(url: str) -> RawCycle:
    parsed = parse_url(url)
    if parsed.scheme == "sqlite":
        return RawSQLite(parsed.target + ".raw")
    return RawPostgres(parsed.target, schema_of(url) + "_raw")


def reset_hailq(url: str) -> hailq.Queue:
    broker = hailq.connect(url)
    queue = broker.queue(QUEUE, lease=60)
    queue.purge(dead=False)
    queue.purge(dead=True)
    vacuum(url)
    return queue


def vacuum(url: str) -> None:
    """On PostgreSQL, vacuum hailq's tables as autovacuum would between phases, and
    checkpoint.

    A queue table turns over every row; without vacuum its indexes fill with dead
    entries and every claim wades through them. Production servers run autovacuum;
    this machine's shared server has it off, and the raw baseline starts each phase
    from a truncated table, so both sides get a clean table.
    """
    parsed = parse_url(url)
    if parsed.scheme != "postgresql":
        return
    import psycopg
    from psycopg import sql

    with psycopg.connect(parsed.target, autocommit=True) as conn:
        schema = sql.Identifier(schema_of(url))
        for table in ("messages", "counters", "workers", "dedup"):
            conn.execute(sql.SQL("VACUUM ANALYZE {}.{}").format(schema, sql.Identifier(table)))
        # A phase that wrote a million rows leaves a checkpoint due; let it happen now
        # rather than in the middle of the next phase's measurement.
        with contextlib.suppress(psycopg.errors.InsufficientPrivilege):
            conn.execute("CHECKPOINT")


def analyze(url: str) -> None:
    """On PostgreSQL, gather statistics of the filled queue, as autovacuum does once a
    fill has changed a tenth of the table. Without it a phase would be measured on the
    statistics of an empty table, which no server in service has, and where the
    planner's choices differ (see the "Plans" note in postgres/queries.sql)."""
    parsed = parse_url(url)
    if parsed.scheme != "postgresql":
        return
    import psycopg
    from psycopg import sql

    with psycopg.connect(parsed.target, autocommit=True) as conn:
        conn.execute(sql.SQL("ANALYZE {}.messages").format(sql.Identifier(schema_of(url))))


def _paired_rates(n: int, runs: int, setup: Callable[[], None], hailq_work: Callable[[], None],
                  raw_work: Callable[[], None],
                  ) -> tuple[float, float, list[float], list[float]]:
    """Median rates of hailq and raw, measured in turns so both meet the same noise."""
    ours: list[float] = []
    theirs: list[float] = []
    for _ in range(runs):
        for work, rates in ((hailq_work, ours), (raw_work, theirs)):
            setup()
            start = time.perf_counter()
            work()
            rates.append(n / (time.perf_counter() - start))
    return statistics.median(ours), statistics.median(theirs), ours, theirs


SAME_ROW = "send, one by one (vs a bare insert of the same row)"


def bench_send(url: str, runs: int, n_one: int, n_batch: int) -> list[Figure]:
    queue = reset_hailq(url)
    raw = open_raw(url)
    body = {"claim": 8311, "photos": 4}
    raw_body = b'{"claim":8311,"photos":4}'
    figures = []

    def clear() -> None:
        queue.purge(dead=False)
        vacuum(url)
        raw.reset()

    def hailq_one() -> None:
        for _ in range(n_one):
            queue.send(body)

    def raw_one() -> None:
        for _ in range(n_one):
            raw.send_one(raw_body)

    h, r, hr, rr = _paired_rates(n_one, runs, clear, hailq_one, raw_one)
    figures.append(Figure("send, one by one", "msgs/s", h, r, hr, rr))
    if isinstance(raw, RawPostgres):
        # The same loop against a bare insert of the row a send stores, in a table with
        # the columns and indexes of hailq's: what hailq adds to storing the message.
        raw.shape_like(f'"{schema_of(url)}".messages')

        def raw_row() -> None:
            for _ in range(n_one):
                raw.send_one_row(raw_body)

        h, r, hr, rr = _paired_rates(n_one, runs, clear, hailq_one, raw_row)
        figures.append(Figure(SAME_ROW, "msgs/s", h, r, hr, rr))

    def hailq_batches() -> None:
        for _ in range(n_batch // 100):
            queue.send_many([body] * 100)

    def raw_batches() -> None:
        for _ in range(n_batch // 100):
            raw.send_batch([raw_body] * 100)

    h, r, hr, rr = _paired_rates(n_batch, runs, clear, hailq_batches, raw_batches)
    figures.append(Figure("send, batches of 100", "msgs/s", h, r, hr, rr))
    clear()
    raw.close()
    return figures


def take_until_empty(take: Callable[[], list[T]], settle: Callable[[list[T]], object]) -> int:
    """Take batches and settle each until a take comes back empty; how many were taken."""
    done = 0
    while batch := take():
        settle(batch)
        done += len(batch)
    return done


def _drain_hailq(url: str, batch: int, barrier: Any, out: Any) -> None:
    queue = hailq.connect(url).queue(QUEUE, lease=60)
    barrier.wait()
    start = time.perf_counter()
    done = take_until_empty(lambda: queue.receive(batch), queue.ack_many)
    out.put((start, time.perf_counter(), done))


def _drain_raw(url: str, batch: int, barrier: Any, out: Any) -> None:
    raw = open_raw(url)
    barrier.wait()
    start = time.perf_counter()
    done = take_until_empty(lambda: raw.claim(batch), raw.ack)
    out.put((start, time.perf_counter(), done))


def _drain(target: Callable[..., None], url: str, procs: int, batch: int) -> float:
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(procs)
    out = ctx.Queue()
    workers = [ctx.Process(target=target, args=(url, batch, barrier, out)) for _ in range(procs)]
    for w in workers:
        w.start()
    results = [out.get() for _ in workers]
    for w in workers:
        w.join()
    start = min(r[0] for r in results)
    end = max(r[1] for r in results)
    return float(sum(r[2] for r in results) / (end - start))


def _refill(queue: hailq.Queue, url: str, n: int, keys: int | None = None) -> None:
    """Empty the bench queue and send it ``n`` messages: plain, or over ``keys`` keys."""
    queue.purge(dead=False)
    vacuum(url)
    if keys:
        fill_keyed(queue, n, keys)
    else:
        for _ in range(n // 1000):
            queue.send_many([{"claim": 8311}] * 1000)
    analyze(url)


def bench_cycle(url: str, runs: int, n: int, procs: int, batch: int) -> Figure:
    queue = reset_hailq(url)
    raw = open_raw(url)
    hailq_rates, raw_rates = [], []
    for _ in range(runs):
        _refill(queue, url, n)
        hailq_rates.append(_drain(_drain_hailq, url, procs, batch))
        raw.reset()
        raw.fill(n)
        raw_rates.append(_drain(_drain_raw, url, procs, batch))
    raw.close()
    label = f"receive+ack, {procs} consumer{'s' if procs > 1 else ''}" + (
        " (processes)" if procs > 1 else "") + f", batch {batch}"
    return Figure(label, "msgs/s", statistics.median(hailq_rates),
                  statistics.median(raw_rates), hailq_rates, raw_rates)


def fill_keyed(queue: hailq.Queue, n: int, keys: int) -> None:
    """``n`` messages over ``keys`` ordering keys, round robin: each key's next message
    waits behind its head (rule 17) until that is acked."""
    body = {"claim": 8311}
    for start in range(0, n, 1000):
        queue.send_many([hailq.Envelope(body, ordering_key=f"policy-{i % keys}")
                         for i in range(start, min(start + 1000, n))])


def bench_keys(url: str, runs: int, n: int, batch: int, keys: int = 10_000) -> Figure:
    """Rule 17 at scale: one consumer drains ``n`` messages spread over ``keys`` ordering
    keys, beside the same drain without keys in the same turn. The baseline here is
    hailq itself: the ratio is what per-key order costs."""
    queue = reset_hailq(url)
    keyed_rates, plain_rates = [], []
    for _ in range(runs):
        _refill(queue, url, n, keys)
        keyed_rates.append(_drain(_drain_hailq, url, 1, batch))
        _refill(queue, url, n)
        plain_rates.append(_drain(_drain_hailq, url, 1, batch))
    return Figure(f"receive+ack, {keys:,} order keys (vs none), batch {batch}", "msgs/s",
                  statistics.median(keyed_rates), statistics.median(plain_rates),
                  keyed_rates, plain_rates)


def bench_latency(url: str, backlogs: list[int], samples: int,
                  progress: Callable[[str], None]) -> list[Figure]:
    queue = reset_hailq(url)
    raw = open_raw(url)
    raw.reset()
    figures = []
    filled = 0
    body = {"claim": 8311}
    for backlog in backlogs:
        progress(f"filling {backlog:,} messages")
        while filled < backlog:
            step = min(1000, backlog - filled)
            queue.send_many([body] * step)
            filled += step
        vacuum(url)
        raw.reset()
        raw.fill(backlog)
        h_times, r_times = [], []
        # A fill leaves the newest pages cached and the oldest (which claims read) cold:
        # warm both sides up alike before timing, as a queue in service is.
        for _ in range(WARMUP):
            queue.ack_many(queue.receive(1))
            queue.send(body)
            raw.ack(raw.claim(1))
            raw.send_one(b'{"claim":8311}')
        for _ in range(samples):
            start = time.perf_counter()
            got = queue.receive(1)
            h_times.append(time.perf_counter() - start)
            queue.ack_many(got)
            queue.send(body)  # keep the backlog constant
            start = time.perf_counter()
            ids = raw.claim(1)
            r_times.append(time.perf_counter() - start)
            raw.ack(ids)
        figures.append(Figure(f"receive latency, {backlog:,} waiting", "ms",
                              statistics.median(h_times) * 1000,
                              statistics.median(r_times) * 1000))
    queue.purge(dead=False)
    raw.reset()
    raw.close()
    return figures


def machine() -> dict[str, Any]:
    return {"cores": os.cpu_count(), "load": os.getloadavg()}
