"""Plain helpers for the conformance suite: raw database access and drain loops.

The suite talks to hailq only through its public API. These helpers exist for
the few places where a test needs the database itself: a consumer's own table
for an effect (rules 3, 21, 22), the database clock (rule 11), or a check that
the file is intact (rule 28).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import hailq
from waiting import wait_past
from waiting import wait_until as wait_until  # the one shared wait, re-exported

HAILQ_PG_OPTIONS = {"schema", "pool_size", "poll_interval"}


@dataclass(frozen=True)
class RawDatabase:
    """The database behind a broker URL, opened with the plain driver.

    ``sql`` turns ``?`` placeholders into the driver's (``%s`` on psycopg), and
    ``table`` qualifies a table name with the test's schema on PostgreSQL, so
    one test text runs on both backends.
    """

    backend: str
    url: str

    @property
    def is_sqlite(self) -> bool:
        return self.backend == "sqlite"

    @property
    def path(self) -> str:
        return self.url[len("sqlite:///"):].split("?", 1)[0]

    @property
    def schema(self) -> str:
        return dict(parse_qsl(urlsplit(self.url).query)).get("schema", "hailq")

    @property
    def libpq_url(self) -> str:
        """The PostgreSQL URL without hailq's own options (psycopg does not know them)."""
        parts = urlsplit(self.url)
        rest = [(k, v) for k, v in parse_qsl(parts.query) if k not in HAILQ_PG_OPTIONS]
        return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(rest), ""))

    def connect(self) -> Any:
        """A new connection; on PostgreSQL its search path is the test's schema."""
        if self.is_sqlite:
            return sqlite3.connect(self.path, timeout=60)
        import psycopg

        conn = psycopg.connect(self.libpq_url)
        conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
        conn.execute(f'SET search_path TO "{self.schema}"')
        conn.commit()
        return conn

    def sql(self, text: str) -> str:
        return text if self.is_sqlite else text.replace("?", "%s")

    def table(self, name: str) -> str:
        return name if self.is_sqlite else f'"{self.schema}".{name}'

    def execute(self, text: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Run one statement in its own committed transaction; return its rows."""
        conn = self.connect()
        try:
            cur = conn.execute(self.sql(text), params)
            found = cur.fetchall() if cur.description else []
            conn.commit()
            return [tuple(r) for r in found]
        finally:
            conn.close()

    def create_table(self, name: str, columns: str) -> str:
        """Create a table for a consumer's effect; return its qualified name."""
        qualified = self.table(name)
        self.execute(f"CREATE TABLE {qualified} ({columns})")
        return qualified

    def count(self, table: str) -> int:
        return int(self.execute(f"SELECT count(*) FROM {table}")[0][0])

    def now(self) -> float:
        """The database's clock in epoch seconds (the host clock for SQLite)."""
        if self.is_sqlite:
            return time.time()
        return float(self.execute("SELECT extract(epoch FROM clock_timestamp())")[0][0])


def drain(queue: hailq.Queue, handle: Callable[[hailq.Message], None], *,
          batch: int = 50, idle_wait: float = 0.2) -> None:
    """Receive and handle until nothing is ready, scheduled, blocked or in flight."""
    while True:
        messages = queue.receive(max_messages=batch, wait=idle_wait)
        for message in messages:
            handle(message)
        if not messages:
            stats = queue.stats()
            if stats.backlog == 0 and stats.in_flight == 0:
                return


def receive_all(queue: hailq.Queue, batch: int = 1000) -> list[hailq.Message]:
    """Everything receivable right now, in delivery order."""
    found: list[hailq.Message] = []
    while True:
        messages = queue.receive(max_messages=batch)
        if not messages:
            return found
        found.extend(messages)




# The ``broker`` fixture's clock on SQLite, by id(broker): real time plus a skew a test moves on.
SKEWS: dict[int, list[float]] = {}


def advance(broker: hailq.Broker, seconds: float) -> None:
    """Let ``seconds`` pass on the broker's clock (leases end, delays come due).

    SQLite: the ``broker`` fixture's injected clock moves on at once, no real time passes.
    PostgreSQL: the database's clock rules (rule 11), so wait, bounded, until it has moved on.
    Only this broker sees the time pass on SQLite: other connections keep the host's clock.
    """
    skew = SKEWS.get(id(broker))
    if skew is not None:
        skew[0] += seconds
        return
    wait_past(broker.now, broker.now() + seconds, seconds + 10)


# -- work done in child processes (top-level so the "spawn" start method can find it) ------


def compete(url: str, queue: str, ready: Any, out: str) -> None:
    """Receive 10 at a time and ack each until nothing is left; log every lease to ``out``.

    ``ready`` is a barrier shared with the test and the other consumers: nobody receives
    before every consumer has connected, so a slow start cannot leave one without work.
    Each ack goes through ``ack_many`` and logs its result (``False``: acked while the
    lease was still valid). A short pause per batch stands for the handler's work.
    """
    import json

    log: list[dict[str, Any]] = []
    with hailq.connect(url) as broker:
        q = broker.get_queue(queue)
        ready.wait(60)
        while True:
            messages = q.receive(max_messages=10, lease=300)
            if not messages:
                break
            time.sleep(0.002)  # the handler's work
            for m in messages:
                received = time.time()
                (late,) = q.ack_many([m])
                log.append({"id": m.id, "attempt": m.attempt, "receipt": m.receipt,
                            "received": received, "acked": time.time(), "late": late,
                            "lease_until": m.lease_until, "body": m.body})
    with open(out, "w") as f:
        json.dump(log, f)


def consume_on_a_skewed_host(url: str, queue: str, skew: float, after: float,
                             out: str) -> None:
    """A consumer on a host whose clock is ``skew`` seconds off the database's.

    ``time.time`` is skewed first and hailq is then imported afresh, so no part of it
    can hold the real clock from import time. Once the broker's clock (the database's)
    has passed ``after``, receive up to 10 with a 30 s lease, send one message, and
    write what was received, with the host's own idea of the time, to ``out``.
    """
    import importlib
    import json
    import sys

    real_time = time.time
    time.time = lambda: real_time() + skew
    for name in [n for n in sys.modules if n == "hailq" or n.startswith("hailq.")]:
        del sys.modules[name]
    fresh = importlib.import_module("hailq")

    with fresh.connect(url) as broker:
        q = broker.get_queue(queue)
        wait_past(broker.now, after, 60)
        got = q.receive(max_messages=10, lease=30)
        host_now = time.time()
        q.send(f"sent by a host {skew:+g} s off")
        result = {"host_now": host_now, "db_now": broker.now(),
                  "received": [{"body": m.body, "attempt": m.attempt,
                                "lease_until": m.lease_until, "receipt": m.receipt}
                               for m in got]}
    with open(out, "w") as f:
        json.dump(result, f)


def hammer(url: str, queue: str, worker: int, count: int, start: Any, out: str) -> None:
    """Send, receive and ack in small steps; write any error text to ``out``."""
    import json

    errors: list[str] = []
    acked: list[int] = []
    try:
        with hailq.connect(url) as broker:
            q = broker.queue(queue, lease=300)
            start.wait(60)
            for i in range(count):
                q.send({"worker": worker, "n": i})
                for m in q.receive(max_messages=2):
                    m.ack()
                    acked.append(m.body["worker"] * 1_000_000 + m.body["n"])
    except Exception as exc:  # the test reports whatever reached the user
        errors.append(f"{type(exc).__name__}: {exc}")
    with open(out, "w") as f:
        json.dump({"errors": errors, "acked": acked}, f)


def connect_fresh_and_send(url: str, worker: int, start: Any, out: str) -> None:
    """Open a brand-new database at the same moment as others; declare and send."""
    import json

    errors: list[str] = []
    try:
        start.wait(60)
        with hailq.connect(url) as broker:
            q = broker.queue("claims")
            for i in range(20):
                q.send({"worker": worker, "n": i})
    except Exception as exc:
        errors.append(f"{type(exc).__name__}: {exc}")
    with open(out, "w") as f:
        json.dump(errors, f)


def receive_and_die(url: str, queue: str) -> None:
    """A consumer that takes one message and dies without acking (os._exit skips cleanup)."""
    import os

    broker = hailq.connect(url)
    got = broker.get_queue(queue).receive()
    os._exit(0 if got else 3)


def transaction(conn: Any) -> Any:
    """The driver's own "commit on success, roll back on error" block."""
    if isinstance(conn, sqlite3.Connection):
        return conn
    return conn.transaction()


def ack_late(url: str, queue: str) -> None:
    """A consumer process that acks after its lease ended, then simply returns."""
    broker = hailq.connect(url)
    q = broker.get_queue(queue)
    (m,) = q.receive(lease=0.2)
    wait_past(broker.now, m.lease_until)
    m.ack()
