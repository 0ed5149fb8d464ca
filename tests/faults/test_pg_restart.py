"""SPEC rule 28 on PostgreSQL: server restarts and killed sessions are survived.

Every test runs on a throwaway server of its own (``throwaway_pg``), never the
shared one. Workers are real ``hailq worker`` processes whose long-poll
fallback is 10 s (``--poll 10`` and ``poll_interval=10``), so a wake-up within
a second can only come from LISTEN/NOTIFY: it proves LISTEN was re-established.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

import hailq
from waiting import wait_for, wait_until

from .conftest import Figure, effect_store_for
from .ledger import EffectStore, Ledger, check_queue
from .pgserver import PgServer
from .workers import WorkerFleet, unfinished

# A long scenario with servers of its own: CI runs it after make test (.ci/run's fault
# stage), make test-faults always.
pytestmark = pytest.mark.slow

SLOW_POLL = 10


@pytest.fixture
def pg(throwaway_pg: PgServer) -> Iterator[PgServer]:
    yield throwaway_pg
    throwaway_pg.wait_ready(60)  # whatever a test did, the next one finds the server up


@pytest.fixture
def pg_schema(pg: PgServer) -> Iterator[str]:
    schema = f"pgr_{uuid.uuid4().hex[:8]}"
    yield schema
    pg.wait_ready(60)
    pg.psql(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _effect_of(store: EffectStore, n: int) -> float | None:
    with store._conn() as conn:
        row = conn.execute("SELECT min(at) FROM effects WHERE n = %s", (n,)).fetchone()
    return None if row is None or row[0] is None else float(row[0])


def _wait_effect(store: EffectStore, n: int, timeout: float = 60) -> float:
    def effect() -> float | None:
        try:
            return _effect_of(store, n)
        except psycopg.OperationalError:
            return None  # the server is still coming back

    return float(wait_for(effect, timeout, f"the effect of message {n}"))


def _send_retrying(q: hailq.Queue, ledger: Ledger, n: int, errors: list[BaseException],
                   timeout: float = 60) -> None:
    """Send message ``n`` (dedup id ``m-n``), retrying StorageErrors; keep every error."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            ledger.add([q.send({"n": n}, dedup_id=f"m-{n}")], [n])
            return
        except hailq.StorageError as exc:
            errors.append(exc)
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _drain(q: hailq.Queue, timeout: float = 30) -> None:
    wait_until(lambda: not unfinished(q), timeout, step=0.05)


class Producer(threading.Thread):
    """Sends ``count`` messages at ``rate`` per second through the outage."""

    def __init__(self, url: str, ledger: Ledger, start: int, count: int, rate: float) -> None:
        super().__init__(daemon=True)
        self.url, self.ledger, self.first, self.count, self.rate = url, ledger, start, count, rate
        self.errors: list[BaseException] = []
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            with hailq.connect(self.url) as broker:
                q = broker.get_queue("pgr")
                for n in range(self.first, self.first + self.count):
                    _send_retrying(q, self.ledger, n, self.errors)
                    time.sleep(1 / self.rate)
        except BaseException as exc:
            self.failure = exc


def _terminate_hailq_sessions(pg: PgServer) -> int:
    rows = pg.psql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                   "WHERE datname = 'hailq' AND pid <> pg_backend_pid()")
    return len(rows)


FAULTS: dict[str, Callable[[PgServer], object]] = {
    "restart-fast": lambda pg: pg.restart("fast"),
    "restart-immediate": lambda pg: pg.restart("immediate"),
    "terminate-sessions": _terminate_hailq_sessions,
}


class _owned:
    """Kills the fleet's processes on the way out, whatever happened."""

    def __init__(self, f: WorkerFleet) -> None:
        self.f = f

    def __enter__(self) -> WorkerFleet:
        return self.f

    def __exit__(self, *exc: object) -> None:
        self.f.kill_all()


def _start_fleet(url: str, store: EffectStore, tmp_path: Path) -> WorkerFleet:
    return WorkerFleet(url, "pgr", store, tmp_path, processes=2, concurrency=2, grace=5,
                       extra=("--poll", str(SLOW_POLL)))


@pytest.mark.parametrize("fault", list(FAULTS))
def test_workers_recover_by_themselves_lose_nothing_and_wake_up_after(
        pg: PgServer, pg_schema: str, fault: str, tmp_path: Path, figure: Figure) -> None:
    url = pg.hailq_url(pg_schema, poll_interval=SLOW_POLL)
    store = effect_store_for(url, tmp_path)
    ledger = Ledger()
    with hailq.connect(url) as broker:
        q = broker.queue("pgr", lease=3, max_attempts=20,
                         retry={"base": 0.1, "max": 1.0, "jitter": 0})
        with _owned(_start_fleet(url, store, tmp_path)) as f:
            _send_retrying(q, ledger, 0, [])
            _wait_effect(store, 0, 30)  # the workers are up and idle

            producer = Producer(url, ledger, 1, 400, rate=150)
            producer.start()
            wait_for(lambda: len(ledger) >= 150, 30, "the producer under way")
            t_fault = time.monotonic()
            FAULTS[fault](pg)
            outage = pg.wait_ready(60) + (time.monotonic() - t_fault)
            ready_at = time.time()
            # A message sent the moment the server is back: how long until it takes effect?
            _send_retrying(q, ledger, 100_000, [])
            woke_after_restart = _wait_effect(store, 100_000) - ready_at

            producer.join(120)
            assert producer.failure is None, repr(producer.failure)
            _drain(q, 90)

            # The workers are idle now; LISTEN must wake them (the poll fallback is 10 s).
            time.sleep(2.0)
            sent_at = time.time()
            _send_retrying(q, ledger, 200_000, [])
            idle_wake = _wait_effect(store, 200_000, 30) - sent_at
            _drain(q)  # the effect commits before the ack: let the ack land too

            # The same two processes did all of it: nobody restarted a worker.
            alive = [p.poll() is None for p in f.procs]
            tail = f.log_tail()
        report = check_queue(ledger, store, q)
        stats = q.stats()
    errors = producer.errors
    figure(fault=fault, outage_s=round(outage, 2), producer_errors=len(errors),
           wake_after_restart_s=round(woke_after_restart, 2), idle_wake_s=round(idle_wake, 3),
           redelivered=stats.redelivered, **report.summary())
    assert report.ok, f"{report}\n{tail}"
    assert all(isinstance(e, hailq.StorageError) and not isinstance(e, psycopg.Error)
               for e in errors), errors
    assert alive == [True, True] and f.started == 2, tail
    assert idle_wake < 1.5, f"idle worker woke after {idle_wake:.2f} s: LISTEN not re-established"
    assert woke_after_restart < SLOW_POLL, woke_after_restart


def test_producer_gets_a_clear_storage_error_while_the_server_is_down_and_succeeds_after(
        pg: PgServer, pg_schema: str, tmp_path: Path, figure: Figure) -> None:
    url = pg.hailq_url(pg_schema, poll_interval=SLOW_POLL)
    store = effect_store_for(url, tmp_path)
    ledger = Ledger()
    with hailq.connect(url) as broker:
        q = broker.queue("pgr", lease=3, max_attempts=20)
        with _owned(_start_fleet(url, store, tmp_path)) as f:
            _send_retrying(q, ledger, 0, [])
            _wait_effect(store, 0, 30)

            pg.stop("fast")
            try:
                t0 = time.monotonic()
                with pytest.raises(hailq.StorageError) as caught:
                    q.send({"n": 1})
                took = time.monotonic() - t0
            finally:
                pg.start()
            down_for = time.monotonic() - t0
            error = caught.value
            assert not isinstance(error, psycopg.Error)
            assert f"127.0.0.1:{pg.port}" in str(error), str(error)
            assert error.__cause__ is None or not isinstance(error.__cause__, psycopg.Error) \
                or error.__suppress_context__

            ready_at = time.time()
            _send_retrying(q, ledger, 2, [])
            recovered = _wait_effect(store, 2, 60) - ready_at
            time.sleep(2.0)
            sent_at = time.time()
            _send_retrying(q, ledger, 3, [])
            idle_wake = _wait_effect(store, 3, 30) - sent_at
            _drain(q)
            tail = f.log_tail()
        report = check_queue(ledger, store, q)
    figure(error=str(error), error_after_s=round(took, 2), down_s=round(down_for, 1),
           recovered_s=round(recovered, 2), idle_wake_s=round(idle_wake, 3))
    # "Retried on fresh connections for a few seconds, then reported" (the backend's doc):
    # a producer must learn of the outage in seconds, not minutes.
    assert took < 15, f"the StorageError came after {took:.1f} s"
    assert report.ok, f"{report}\n{tail}"
    assert idle_wake < 1.5, f"idle worker woke after {idle_wake:.2f} s after a long outage"
