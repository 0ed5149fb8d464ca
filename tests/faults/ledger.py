"""The ledger: what was sent, what took effect, and a checker that compares them.

A fault test sends numbered messages and writes each one into the ledger
(message id -> number). Handlers write each *effect* through
``hailq.inbox(conn, consumer)`` into an ``effects`` table in the same
transaction as the inbox record: in a SQLite file of its own, or in a schema of
the PostgreSQL database. The effects table deliberately has no unique key, so a
second effect of one message is stored and found by the checker instead of
being hidden by a constraint.

``check`` reports, per message id:

- *lost*: sent, no effect, and neither live nor dead in the queue;
- *duplicated*: more than one effect;
- *unexpected*: an effect of an id that was never sent, or whose number differs
  from the one sent (a body that did not round-trip);
- *stuck*: still live (ready, scheduled, leased or blocked) when checked;
- *dead*: in the dead-letter queue.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import hailq

EFFECTS_TABLE = (
    "CREATE TABLE IF NOT EXISTS effects ("
    "message_id TEXT NOT NULL, n BIGINT NOT NULL, attempt INTEGER NOT NULL, "
    "pid INTEGER NOT NULL, at DOUBLE PRECISION NOT NULL)"
)


class Ledger:
    """Message id -> number, for every message a test sent (thread-safe for appends)."""

    def __init__(self) -> None:
        self.sent: dict[str, int] = {}

    def add(self, ids: Iterable[str], numbers: Iterable[int]) -> None:
        for message_id, n in zip(ids, numbers, strict=True):
            if message_id in self.sent and self.sent[message_id] != n:
                raise AssertionError(f"id {message_id} returned for {self.sent[message_id]} "
                                     f"and {n}")
            self.sent[message_id] = n

    def __len__(self) -> int:
        return len(self.sent)

    def save(self, path: str) -> None:
        with open(path, "w") as f:
            json.dump(self.sent, f)

    @classmethod
    def load(cls, path: str) -> Ledger:
        ledger = cls()
        with open(path) as f:
            ledger.sent = {str(k): int(v) for k, v in json.load(f).items()}
        return ledger


@dataclass(frozen=True)
class EffectStore:
    """Where handlers write effects: ``sqlite:///path`` or a PostgreSQL URL plus a schema.

    ``spec()`` is one string that the worker processes get in ``FAULTS_EFFECTS``.
    """

    url: str
    schema: str | None = None

    @classmethod
    def from_spec(cls, spec: str) -> EffectStore:
        url, _, schema = spec.partition("#")
        return cls(url, schema or None)

    def spec(self) -> str:
        return self.url + (f"#{self.schema}" if self.schema else "")

    @property
    def is_sqlite(self) -> bool:
        return self.url.startswith("sqlite:///")

    def connect(self) -> Any:
        """A connection in autocommit mode; on PostgreSQL with the schema as search path."""
        if self.is_sqlite:
            conn = sqlite3.connect(self.url[len("sqlite:///"):], timeout=60,
                                   isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            # A killed process loses nothing committed in WAL mode with NORMAL; only a
            # power failure could, and no test here cuts the power.
            conn.execute("PRAGMA synchronous=NORMAL")
            return conn
        import psycopg

        return psycopg.connect(self.url, autocommit=True, connect_timeout=5,
                               options=f"-c search_path={self.schema}")

    def create(self) -> None:
        conn = self.connect()
        try:
            if not self.is_sqlite:
                conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
            conn.execute(EFFECTS_TABLE)
            hailq.inbox(conn, "faults")
        finally:
            conn.close()

    def drop(self) -> None:
        if self.is_sqlite:
            return
        conn = self.connect()
        try:
            conn.execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')
        finally:
            conn.close()

    @contextmanager
    def _conn(self) -> Iterator[Any]:
        conn = self.connect()
        try:
            yield conn
        finally:
            conn.close()

    def rows(self) -> list[tuple[str, int]]:
        """``(message_id, n)`` of every effect, repeats included."""
        with self._conn() as conn:
            return [(str(i), int(n)) for i, n in conn.execute(
                "SELECT message_id, n FROM effects").fetchall()]

    def count(self) -> int:
        with self._conn() as conn:
            return int(conn.execute("SELECT count(*) FROM effects").fetchone()[0])


class EffectWriter:
    """One handler thread's connection: the effect and the inbox record, one transaction."""

    def __init__(self, store: EffectStore, consumer: str = "faults") -> None:
        self.store = store
        self.consumer = consumer
        self.conn = store.connect()
        self.inbox = hailq.inbox(self.conn, consumer)

    def apply(self, message_id: str, n: int, attempt: int, pid: int, at: float) -> bool:
        """Record the effect unless the inbox has seen ``message_id``; True if it was new."""
        if self.store.is_sqlite:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                new = self.inbox.record(message_id)
                if new:
                    self.conn.execute("INSERT INTO effects VALUES (?, ?, ?, ?, ?)",
                                      (message_id, n, attempt, pid, at))
                self.conn.execute("COMMIT")
            except BaseException:
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                raise
            return new
        import psycopg

        for retry in (True, False):
            try:
                with self.conn.transaction():
                    new = self.inbox.record(message_id)
                    if new:
                        self.conn.execute("INSERT INTO effects VALUES (%s, %s, %s, %s, %s)",
                                          (message_id, n, attempt, pid, at))
                return new
            except psycopg.OperationalError:
                # The server restarted or killed the session. Retrying on a new connection
                # is safe even if the COMMIT went through: the inbox then says "seen".
                if not retry:
                    raise
                self.conn.close()
                self.conn = self.store.connect()
                self.inbox = hailq.inbox(self.conn, self.consumer)
        raise AssertionError("unreachable")

    def close(self) -> None:
        self.conn.close()


@dataclass
class Report:
    sent: int
    effects: int
    lost: list[str] = field(default_factory=list)
    duplicated: dict[str, int] = field(default_factory=dict)
    unexpected: list[str] = field(default_factory=list)
    stuck: list[str] = field(default_factory=list)
    dead: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Every message took effect exactly once and nothing is left in the queue."""
        return not (self.lost or self.duplicated or self.unexpected or self.stuck or self.dead)

    def summary(self) -> dict[str, int]:
        return {"sent": self.sent, "effects": self.effects, "lost": len(self.lost),
                "duplicated": len(self.duplicated), "unexpected": len(self.unexpected),
                "stuck": len(self.stuck), "dead": len(self.dead)}

    def __str__(self) -> str:
        parts = [f"{k}={v}" for k, v in self.summary().items()]
        for name in ("lost", "unexpected", "stuck", "dead"):
            ids = getattr(self, name)
            if ids:
                parts.append(f"first {name}: {ids[:5]}")
        if self.duplicated:
            parts.append(f"first duplicated: {list(self.duplicated.items())[:5]}")
        return ", ".join(parts)


def check(ledger: Ledger, effects: Iterable[tuple[str, int]], *, live: Iterable[str] = (),
          dead: Iterable[str] = ()) -> Report:
    """Compare what was sent with what took effect and what the queue still holds."""
    effects = list(effects)
    counts = Counter(i for i, _ in effects)
    live_ids, dead_ids = set(live), set(dead)
    report = Report(sent=len(ledger), effects=len(effects))
    for message_id, n in effects:
        if ledger.sent.get(message_id) != n:
            report.unexpected.append(message_id)
    report.duplicated = {i: c for i, c in counts.items() if c > 1}
    for message_id in ledger.sent:
        if message_id in live_ids:
            report.stuck.append(message_id)
        elif message_id in dead_ids:
            report.dead.append(message_id)
        elif counts[message_id] == 0:
            report.lost.append(message_id)
    return report


def check_queue(ledger: Ledger, store: EffectStore, queue: hailq.Queue) -> Report:
    """``check`` against the effects in ``store`` and what ``queue`` still holds."""
    live = [m.id for m in queue.peek(limit=100_000)]
    dead = [m.id for m in queue.dead_letters(limit=100_000)]
    return check(ledger, store.rows(), live=live, dead=dead)


def sqlite_integrity(path: str) -> str:
    """``PRAGMA integrity_check`` of a SQLite file: ``"ok"`` when intact."""
    conn = sqlite3.connect(path, timeout=60)
    try:
        return "; ".join(str(r[0]) for r in conn.execute("PRAGMA integrity_check"))
    finally:
        conn.close()
