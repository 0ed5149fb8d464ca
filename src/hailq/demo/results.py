"""The insurer's results database: one row per claim, written exactly once per message.

A separate SQLite file (the checkers' own database, not the broker's). Each
check records the message id in ``hailq.inbox`` and upserts the claim's row in
the same short transaction (SPEC rule 21), so a claim checked twice (after a
crash, or by a checker slower than its lease) still has one result, and
``applied`` counts how many times the effect really ran.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from dataclasses import dataclass

import hailq

CONSUMER = "image-checkers"

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS results ("
    " claim INTEGER PRIMARY KEY, contract TEXT, status TEXT NOT NULL,"
    " verdict TEXT, checker TEXT, applied INTEGER NOT NULL DEFAULT 0, done_at REAL)"
)
_UPSERT = (
    "INSERT INTO results (claim, contract, status, verdict, checker, applied, done_at)"
    " VALUES (?, ?, 'done', ?, ?, 1, ?)"
    " ON CONFLICT (claim) DO UPDATE SET status = 'done', verdict = excluded.verdict,"
    " checker = excluded.checker, applied = results.applied + 1, done_at = excluded.done_at"
)
_PARTIAL = (
    "INSERT INTO results (claim, contract, status, checker) VALUES (?, ?, 'partial', ?)"
    " ON CONFLICT (claim) DO NOTHING"
)


BUSY_TIMEOUT = 60.0  # seconds a write waits for another process's transaction


def open_db(path: str) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), WAL, created if needed."""
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT, isolation_level=None,
                           check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(_SCHEMA)
    return conn


def begin(conn: sqlite3.Connection) -> None:
    """``BEGIN IMMEDIATE``, waiting in short sleeps while another process writes.

    A checker process writes here too. SQLite's own busy handler would sleep
    1 ms at first, growing to 100 ms, while a result's transaction holds the lock
    for a fraction of a millisecond, and the main process waits with the lock of
    its ``ResultStore`` held: every checker thread would wait with it. For a
    connection whose busy handler is off (``PRAGMA busy_timeout=0``).
    """
    deadline = time.monotonic() + BUSY_TIMEOUT
    pause = 0.0001
    while True:
        try:
            conn.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as exc:
            if getattr(exc, "sqlite_errorcode", 0) & 0xFF != sqlite3.SQLITE_BUSY \
                    or time.monotonic() > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.005)


class ResultStore:
    """Writes results from many checker threads through one connection, one at a time.

    One connection behind a lock keeps the threads of this process out of
    SQLite's sleeping busy handler; each write is one short transaction.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._conn = open_db(path)
        self._lock = threading.Lock()
        with self._lock:
            self._inbox = hailq.inbox(self._conn, CONSUMER)
            self._conn.execute("PRAGMA busy_timeout=0")  # from here on: ``begin``
        self.skipped = 0

    def save(self, message: hailq.Message, verdict: str, checker: str) -> bool:
        """Record the check of ``message``; False if this message was already recorded."""
        claim = message.body
        assert isinstance(claim, dict)
        with self._lock:
            conn = self._conn
            begin(conn)
            try:
                fresh = self._inbox.record(message.id)
                if fresh:
                    conn.execute(_UPSERT, (claim["claim"], claim["contract"], verdict, checker,
                                           time.monotonic()))
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            if not fresh:
                self.skipped += 1
            return fresh

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def save_partial(path: str, claim: dict[str, object], checker: str) -> None:
    """What a checker writes before it finishes: a partial row, without the inbox.

    The crashing checker leaves one behind; the next check overwrites it.
    """
    conn = open_db(path)
    try:
        conn.execute("PRAGMA busy_timeout=0")
        begin(conn)
        conn.execute(_PARTIAL, (claim["claim"], claim["contract"], checker))
        conn.execute("COMMIT")
    finally:
        conn.close()


@dataclass(frozen=True)
class Tally:
    """What the results database says at the end."""

    done: int
    partial: int
    duplicated: int  # claims whose effect ran more than once
    done_claims: frozenset[int]
    order_by_contract: dict[str, list[tuple[int, float]]]


def tally(path: str) -> Tally:
    """Count the results (read-only)."""
    conn = open_db(path)
    try:
        rows = conn.execute("SELECT claim, contract, status, applied, done_at FROM results"
                            ).fetchall()
    finally:
        conn.close()
    order: dict[str, list[tuple[int, float]]] = {}
    for claim, contract, status, _, done_at in rows:
        if contract and status == "done":
            order.setdefault(contract, []).append((int(claim), float(done_at)))
    return Tally(
        done=sum(1 for r in rows if r[2] == "done"),
        partial=sum(1 for r in rows if r[2] == "partial"),
        duplicated=sum(1 for r in rows if r[3] > 1),
        done_claims=frozenset(int(r[0]) for r in rows if r[2] == "done"),
        order_by_contract=order)
