"""SPEC rule 31: hailq works through PgBouncer in both pooling modes.

A PgBouncer of the test's own (``pgbouncer.py``) fronts the shared test server.
In transaction mode each statement of a client may run on another server
connection, so prepared statements and LISTEN cannot work; ``pooler=transaction``
turns prepared statements off, and workers are woken by LISTEN on a direct
connection (``listen=URL``) or by polling every ``poll_interval`` (the
default there). A URL that does not name the pooler works too: the pooler's first
refusal of a prepared statement turns them off, and waiters are woken by the
bounded poll. Session mode works unchanged. The effects of the real workers
go straight to the server (an application's own connection), and the ledger
checks that nothing is lost and no effect is doubled.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest

import hailq
from conftest import PG_URL, drop_schema, require_postgres

from .conftest import Figure, effect_store_for
from .ledger import EffectStore, Ledger, check_queue
from .pgbouncer import PgBouncer, pgbouncer
from .workers import fleet, unfinished

# A long scenario with servers of its own: CI runs it after make test (.ci/run's fault
# stage), make test-faults always.
pytestmark = pytest.mark.slow

SLOW_POLL = 10  # seconds: a wake-up faster than this came from LISTEN/NOTIFY

# How a user would write the URL for each way through PgBouncer.
CONFIGS = {
    "transaction+listen": ("transaction", "pooler=transaction&listen={direct}"),
    "transaction+poll": ("transaction", "pooler=transaction&poll_interval=0.5"),
    # A new user's URL, the pooler unnamed: LISTEN goes through it and hears nothing,
    # so the poll wakes the worker.
    "transaction+unnamed": ("transaction", "poll_interval=0.5"),
    "session": ("session", ""),
}


@pytest.fixture(scope="module", params=["transaction", "session"])
def bouncer(request: pytest.FixtureRequest) -> Iterator[PgBouncer]:
    require_postgres()
    with pgbouncer(PG_URL, str(request.param)) as b:
        yield b


@pytest.fixture
def schema() -> Iterator[str]:
    name = f"pgb_{uuid.uuid4().hex[:10]}"
    yield name
    drop_schema(name)
    drop_schema(f"{name}_fx")


def _url(bouncer: PgBouncer, schema: str, options: str) -> str:
    direct = quote(f"{PG_URL.split('?')[0]}", safe="")
    extra = options.format(direct=direct)
    return f"{bouncer.url_for(PG_URL.split('?')[0])}?schema={schema}" + (
        f"&{extra}" if extra else "")


def test_rule_31_sends_receives_and_acks_in_many_threads_work_through_pgbouncer(
        bouncer: PgBouncer, schema: str) -> None:
    options = "pooler=transaction" if bouncer.mode == "transaction" else ""
    _many_threads(_url(bouncer, schema, options), bouncer)


def test_rule_31_a_url_that_does_not_name_the_transaction_pooler_works_through_it(
        schema: str, caplog: pytest.LogCaptureFixture) -> None:
    """As a new user would try it: the plain URL. PgBouncer refuses a statement psycopg
    prepared on another server connection; hailq turns prepared statements off and
    runs the call again, so no call fails and nothing is lost or doubled."""
    require_postgres()
    with pgbouncer(PG_URL, "transaction") as bouncer, \
            caplog.at_level(logging.WARNING, logger="hailq.postgres"):
        _many_threads(_url(bouncer, schema, ""), bouncer)
    warned = [r.getMessage() for r in caplog.records if r.name == "hailq.postgres"]
    assert warned and all("prepares no statements and polls" in w for w in warned), warned


def _many_threads(url: str, bouncer: PgBouncer) -> None:
    errors: list[BaseException] = []
    done: list[int] = []
    with hailq.connect(url) as broker:
        q = broker.queue("pooled", lease=30, retry={"base": 0.01, "jitter": 0})
        keyed = broker.queue("pooled-keyed")

        def client(n: int) -> None:
            # Far more than psycopg's 5 runs of each statement, from 8 threads: a statement
            # prepared on one server connection would be run on another.
            try:
                for i in range(40):
                    q.send({"n": n * 100 + i}, dedup_id=f"{n}-{i}" if i % 3 == 0 else None)
                    keyed.send({"n": i}, ordering_key=f"k{n}")
                    for m in q.receive(max_messages=2):
                        if m.body["n"] % 7 == 0 and m.attempt == 1:  # type: ignore[index]
                            m.nack(delay=0)
                        else:
                            m.extend(30)
                            m.ack()
                            done.append(1)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=client, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert errors == [], errors[:3]
        q.send_many([{"n": -1}, {"n": -2}])
        deadline = time.monotonic() + 30
        while unfinished(q) and time.monotonic() < deadline:
            batch = q.receive(max_messages=50, wait=0.5)
            q.ack_many(batch)
            done.extend(1 for _ in batch)
        order: list[tuple[str | None, int]] = []
        while batch := keyed.receive(max_messages=10):
            order.extend((m.ordering_key, m.body["n"]) for m in batch)  # type: ignore[index]
            keyed.ack_many(batch)

        # The outbox: sends inside the application's own transactions, on its own
        # connection through the pooler; more than 5 of them, so a statement psycopg
        # had prepared would be missing on the next server connection.
        with psycopg.connect(bouncer.url_for(PG_URL.split("?")[0])) as app:
            for n in range(12):
                with app.transaction():
                    q.send({"n": f"outbox-{n}"}, connection=app)
        outbox = q.receive(max_messages=20)
        q.ack_many(outbox)
        assert len(outbox) == 12

        # The effect and its ack in one transaction, through the pooler too.
        q.send({"n": "effect"})
        [m] = q.receive()
        with m.transaction() as conn:
            conn.execute("SELECT 1")
        stats = q.stats()
    assert len(done) == 8 * 40 + 2
    assert (stats.ready, stats.in_flight, stats.scheduled) == (0, 0, 0)
    for key in {k for k, _ in order}:
        assert [n for k, n in order if k == key] == list(range(40))
    assert len(order) == 8 * 40


@pytest.mark.parametrize("config", list(CONFIGS))
def test_rule_31_a_real_worker_runs_through_pgbouncer_and_wakes_when_work_arrives(
        config: str, schema: str, tmp_path: Path, figure: Figure) -> None:
    require_postgres()
    mode, options = CONFIGS[config]
    polls = "poll_interval" in options
    if not polls:
        options += ("&" if options else "") + f"poll_interval={SLOW_POLL}"
    with pgbouncer(PG_URL, mode) as bouncer:
        url = _url(bouncer, schema, options)
        # The handlers' effects go straight to the server, as an application's would.
        store: EffectStore = effect_store_for(f"{PG_URL.split('?')[0]}?schema={schema}",
                                              tmp_path)
        ledger = Ledger()
        with hailq.connect(url) as broker:
            q = broker.queue("pooled", lease=10)
            with fleet(url, "pooled", store, tmp_path, processes=1, concurrency=4,
                       extra=("--poll", "0.5" if polls else str(SLOW_POLL))) as f:
                ids = q.send_many([{"n": n} for n in range(200)])
                ledger.add(ids, range(200))
                _wait_until(lambda: store.count() >= 200, 60, f.log_tail)
                _wait_until(lambda: not unfinished(q), 30, f.log_tail)
                time.sleep(1.5)  # idle: the worker sleeps until woken
                sent_at = time.monotonic()
                ledger.add([q.send({"n": 1000})], [1000])
                _wait_until(lambda: store.count() >= 201, 30, f.log_tail)
                woke = time.monotonic() - sent_at
                _wait_until(lambda: not unfinished(q), 30, f.log_tail)
                tail = f.log_tail()
                alive = all(p.poll() is None for p in f.procs)
            report = check_queue(ledger, store, q)
        log = bouncer.log()
    figure(config=config, idle_wake_s=round(woke, 3), **report.summary())
    assert report.ok, f"{report}\n{tail}"
    assert alive, tail
    assert "prepared statement" not in tail, tail
    if config == "transaction+unnamed":
        # The worker found the pooler by its first refusal, and said so.
        assert "prepares no statements and polls" in tail, tail
    # LISTEN (direct, or through session pooling) wakes at once; polling within its
    # interval (0.5 s, plus a claim).
    assert woke < 1.5, f"woke after {woke:.2f} s\n{tail}\n{log}"


def _wait_until(done: object, timeout: float, tail: object) -> None:
    assert callable(done) and callable(tail)
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"not done within {timeout} s\n{tail()}")
        time.sleep(0.05)
