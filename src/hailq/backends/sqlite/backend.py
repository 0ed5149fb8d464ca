"""The SQLite dialect: many processes on one machine share one database file.

Connections, transactions and fast paths only; what happens in which order is
``backends/core.py``'s. Writes start with ``BEGIN IMMEDIATE`` so contention
waits instead of failing; every thread and every forked process opens its own
connection. Sends commit with ``synchronous=FULL`` (durable before ``send``
returns); leases and acks commit with ``NORMAL``: losing one on power failure
only causes a redelivery, which at-least-once allows.
"""

from __future__ import annotations

import contextlib
import functools
import json
import operator
import os
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from functools import partial
from itertools import chain
from pathlib import Path
from typing import Any, TypeVar

from hailq._time import Clock, system_clock
from hailq.backends.base import ClaimedRow, NewMessage, Receipt
from hailq.backends.dialect import Acked, Dialect, FastPathMissed, Tx
from hailq.backends.history import Mark
from hailq.backends.sql import SqlBackend
from hailq.backends.sqlfile import load_migrations, load_queries
from hailq.backends.sqlite.connection import (
    Forks,
    ForkSafeLock,
    Local,
    Transaction,
    begin,
    briefly,
    busy,
    end,
    functions,
    outage_of,
    statements,
    unavailable,
)
from hailq.backends.sqlite.inserts import insert
from hailq.backends.sqlite.watch import FolderWatch
from hailq.errors import InvalidArgument, SchemaError, StorageError
from hailq.outage import GaveWay

Q = load_queries("hailq.backends.sqlite")
MIGRATIONS = load_migrations("hailq.backends.sqlite")
SCHEMA_TABLE = (
    "CREATE TABLE IF NOT EXISTS hailq_schema ("
    "version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)"
)
_REOPEN_AFTER = {8, 10, 14}  # SQLITE_READONLY, SQLITE_IOERR, SQLITE_CANTOPEN
_ACK_CHUNK = 500  # messages per batch-ack statement: 4 parameters each, SQLite allows 32,766
_T = TypeVar("_T")
# A commit copies every page it changed into the WAL; a claim or an ack changes a few rows
# of about 100 bytes in the table and in three indexes. With 1 KiB pages instead of
# SQLite's 4 KiB a commit writes a quarter of the bytes: receive+ack one by one ran
# about 20% faster here (docs/performance.md).
PAGE_SIZE = 1024
_FIRST_PAUSE = 0.001  # seconds: the first sleep while another process holds the write lock
_RECHECK = 0.1  # seconds between looks for messages that became due by time alone
_EAGER = 0.05  # seconds of fast polling after a write was seen, until its commit shows


class _Tx(Tx):
    """A connection at work in a transaction (or reading), with the clock's time."""

    __slots__ = ("conn", "now")
    conn: sqlite3.Connection

    def __init__(self, conn: sqlite3.Connection, now: float) -> None:
        self.conn = conn
        self.now = now

    def run(self, name: str, params: Mapping[str, Any]) -> list[Any]:
        return self.conn.execute(Q[name], _sqlite_args(params)).fetchall()

    def exec(self, name: str, params: Mapping[str, Any]) -> int:
        return int(self.conn.execute(Q[name], _sqlite_args(params)).rowcount)

    def has(self, name: str) -> bool:
        return name in Q

    def atomic(self) -> AbstractContextManager[None]:
        return _ONE_TRANSACTION  # every unit of work is one write transaction already


_ONE_TRANSACTION = contextlib.nullcontext()


def _sqlite_args(params: Mapping[str, Any]) -> dict[str, Any]:
    """Lists travel as JSON arrays (read with json_each), booleans as 0 and 1."""
    return {k: json.dumps(v) if isinstance(v, list | tuple) else v for k, v in params.items()}


class SQLiteDialect(Dialect):
    """hailq on one SQLite file (``sqlite:///path/to/file.db``)."""

    flavor = "sqlite"

    def __init__(self, path: str, *, synchronous: str = "full", busy_timeout: float = 60.0,
                 clock: Clock = system_clock, poll_interval: float = 0.005) -> None:
        if synchronous not in ("full", "normal", "off", "extra"):
            raise InvalidArgument(
                f"synchronous must be full, extra, normal or off, got {synchronous!r}")
        self.path = os.path.abspath(path)
        self.url_for_display = f"sqlite:///{path}"
        self._send_sync = synchronous.upper()
        self._busy_timeout = busy_timeout
        self._clock = clock
        self._poll_interval = poll_interval
        self._local = Local()
        self._writer = ForkSafeLock()
        self._outage = outage_of(self.path)  # its lines: connection.unavailable, end

    # -- connections -------------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        local = self._local
        if local.conn is None or local.generation != Forks.generation:
            # A connection inherited through fork is dropped, never used or closed here.
            local.conn = self._open()
            local.generation = Forks.generation
            local.synchronous = ""
            local.version = None
            local.watch = None
            local.watch_failed = False
        return local.conn

    def _open(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(self.path, timeout=self._busy_timeout, isolation_level=None,
                                   check_same_thread=False)
            conn.execute("PRAGMA cache_size=-16000")  # 16 MB: the hot indexes stay in memory
            # The temporary tables behind `IN (...)` (a batch claim, a batch ack) stay in
            # memory: opened the default way, each one allocated a file pager whose memory
            # could go back to the system and fault in again on the next statement, which
            # made such statements up to 8 times slower in some processes. They hold at most
            # a batch of row numbers.
            conn.execute("PRAGMA temp_store=MEMORY")
            # Only takes effect while the file is still empty: a new database gets small
            # pages, an existing one keeps its own.
            conn.execute(f"PRAGMA page_size={PAGE_SIZE}")
            # Switching a new file to WAL takes its lock; processes starting together
            # on a fresh file may find it taken without SQLite's busy handler waiting.
            mode = self._patiently(
                lambda: conn.execute("PRAGMA journal_mode=WAL").fetchone()[0])
            if mode.lower() != "wal":
                raise StorageError(f"SQLite database {self.path}: could not switch to WAL ({mode})")
            # From here on a busy database is waited for in ``_patiently``, not in SQLite's
            # busy handler, whose sleeps grow to 100 ms: far longer than a hailq write holds
            # the lock. Setting it once saves two PRAGMAs per transaction.
            conn.execute("PRAGMA busy_timeout=0")
            functions(conn, self._clock)  # rule 16's sort key, the broker's clock
        except sqlite3.Error as exc:
            raise self._storage_error(exc) from None
        self._outage.reached()
        return conn

    def _storage_error(self, exc: BaseException) -> StorageError:
        code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
        if code in _REOPEN_AFTER:
            # A connection opened while the file was read-only (or unreachable) stays so:
            # forget it, so the next call opens a fresh one once the file is writable again.
            conn, self._local.conn = self._local.conn, None
            if conn is not None:
                with contextlib.suppress(sqlite3.Error):
                    conn.close()
        return unavailable(self, StorageError(f"SQLite database {self.path}: {exc}"), code)

    def _begin(self, conn: sqlite3.Connection) -> None:
        self._patiently(lambda: conn.execute("BEGIN IMMEDIATE"))

    def _patiently(self, attempt: Callable[[], _T]) -> _T:
        """Run ``attempt`` until the database is not busy, sleeping 1 ms, growing to 5 ms,
        in between. Contention never reaches the caller as "database is locked"; after
        busy_timeout it is a StorageError."""
        deadline = 0.0
        # Not shorter: with more processes than cores, a waiter that wakes every 0.1 ms
        # takes the CPU from the process holding the lock (measured: 4 processes on 2
        # cores moved 40% fewer messages than with 1 ms).
        pause = _FIRST_PAUSE
        while True:
            try:
                return attempt()
            except sqlite3.OperationalError as exc:
                if not busy(exc):
                    raise
                now, brief = time.monotonic(), self._local.patience
                if not deadline:
                    deadline = now + (self._busy_timeout if brief is None else brief)
                elif brief is not None and now > deadline:  # briefly(): give way quietly
                    raise GaveWay(f"SQLite database {self.path}: busy") from None
                elif now > deadline:
                    raise unavailable(self, StorageError(
                        f"SQLite database {self.path}: still busy after "
                        f"{self._busy_timeout:g} s: another connection holds the write "
                        "lock (another process, or a transaction of yours left open, "
                        "e.g. after send(connection=...) without commit)"), 5) from None
            time.sleep(pause)
            pause = min(pause * 1.5, 0.005)

    def work(self, fn: Callable[[Tx], _T], *, durable: bool,
             rerun: Callable[[Tx], _T] | None = None) -> _T:
        # SQLite never loses a connection mid-call: nothing is re-run.
        conn = begin(self, durable)
        tx = _Tx.__new__(_Tx)  # without __init__'s frame: every receive and ack makes one
        tx.conn, tx.now = conn, self._clock()
        try:
            result = fn(tx)
        except BaseException as exc:
            end(self, conn, exc)
            raise
        end(self, conn, None)
        return result

    def briefly(self) -> AbstractContextManager[None]:
        return briefly(self)

    def read(self, fn: Callable[[Tx], _T]) -> _T:
        try:
            tx = _Tx(self._connection(), self._clock())
            return self._patiently(lambda: fn(tx))
        except sqlite3.Error as exc:
            raise self._storage_error(exc) from None

    def caller_queries(self) -> Mapping[str, str]:
        return Q

    def caller_now(self) -> float | None:
        return self._clock()

    @contextmanager
    def effect(self) -> Iterator[tuple[Tx, Any]]:
        with Transaction(self, True) as conn:
            yield _Tx(conn, self._clock()), conn

    # -- schema ------------------------------------------------------------------------

    def schema_migrate(self) -> int:
        with Transaction(self, True) as conn:
            conn.execute(SCHEMA_TABLE)
            current = conn.execute("SELECT coalesce(max(version), 0) FROM hailq_schema")
            version = int(current.fetchone()[0])
            if version > len(MIGRATIONS):
                raise SchemaError(
                    f"SQLite database {self.path} has hailq schema version {version}; this "
                    f"hailq knows up to {len(MIGRATIONS)}: upgrade hailq")
            for number, name, sql in MIGRATIONS[version:]:
                for statement in statements(sql):
                    conn.execute(statement)
                conn.execute("INSERT INTO hailq_schema VALUES (?, ?, ?)",
                             (number, name, self._clock()))
                version = number
        return version

    def schema_latest(self) -> int:
        return len(MIGRATIONS)

    def schema_version(self) -> int:
        if not os.path.exists(self.path):
            return 0
        # A read-only connection of its own, without hailq's PRAGMAs: switching a file
        # that is not hailq's to WAL would change it, and so would the checkpoint the last
        # read-write connection to a WAL file makes as it closes.
        try:
            with contextlib.closing(sqlite3.connect(
                    f"{Path(self.path).as_uri()}?mode=ro", uri=True,
                    timeout=self._busy_timeout, isolation_level=None)) as conn:
                if not conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' "
                                    "AND name = 'hailq_schema'").fetchall():
                    return 0
                row = conn.execute("SELECT coalesce(max(version), 0) FROM hailq_schema")
                return int(row.fetchone()[0])
        except sqlite3.Error as exc:
            raise StorageError(f"SQLite database {self.path}: {exc}") from None

    def clock_now(self) -> float:
        return self._clock()

    # -- fast paths --------------------------------------------------------------------

    def insert(self, tx: Tx, messages: Sequence[NewMessage], rerun: bool = False) -> int:
        # rerun: never here, SQLite has no connection to lose mid-commit
        now = float(tx.now or 0.0)
        return insert(tx.conn, messages, now, Q, _for_rows)

    def claim(self, tx: Tx, queue: str, n: int, lease: float,
              mark: Mark | None = None) -> list[ClaimedRow]:
        token = os.urandom(8).hex()  # secrets.token_hex(8) without its three frames
        conn, lease_until = tx.conn, float(tx.now or 0.0) + lease
        found = conn.execute(Q["message_claim"], {"queue": queue, "n": n, "token": token,
                                                  "lease_until": lease_until}).fetchall()
        if not found:
            return []
        # map and itemgetter: no Python frame per claim, nor per row
        if mark is not None and len(mark.consumers) > 1:  # a worker's slots (rule 40)
            seqs, who = [*map(_SEQ, found)], [*mark.consumers, *mark.consumers[:1] * len(found)]
            conn.execute(_for_rows("message_claim_mark_slots", len(found)), [
                token, lease_until, mark.retain, *chain(*zip(seqs, who, strict=False)),
                tx.now, *seqs])
        else:
            marks = [token, lease_until] if mark is None else [
                token, lease_until, mark.retain, mark.consumers[0], tx.now]
            conn.execute(_for_rows("message_claim_mark" if mark is None  # history: rule 40
                                   else "message_claim_mark_retain", len(found)),
                         [*marks, *map(_SEQ, found)])
        if max(map(_ATTEMPT, found)) > 1:
            conn.execute(Q["count_redelivered"], {
                "queue": queue, "n": sum(a > 1 for a in map(_ATTEMPT, found))})
        conn.execute(Q["fence_take"], {"n": len(found)})  # rule 41: tokens in claim order
        if len(found) == 1:
            return [tuple.__new__(ClaimedRow, found[0])]
        return [tuple.__new__(ClaimedRow, (*r[:13], r[13] + i)) for i, r in enumerate(found)]

    def ack(self, tx: Tx, receipts: Sequence[Receipt]) -> list[Acked]:
        """Receipts of one queue, by receipt (``ack_in_time`` has the shortcuts)."""
        conn, now = tx.conn, tx.now
        queue = receipts[0].queue
        if len(receipts) == 1:  # one message, the most common ack: nothing to group
            one = receipts[0]
            found = [Acked(*r) for r in conn.execute(Q["message_ack_one"], {
                "seq": one.seq, "id": one.message_id, "token": one.token,
                "queue": queue, "now": now})]
        else:
            known = [r for r in receipts if r.seq is not None]  # found by position
            found = []
            for start in range(0, len(known), _ACK_CHUNK):
                part = known[start:start + _ACK_CHUNK]
                found += [Acked(*r) for r in conn.execute(
                    _for_rows("message_ack", len(part)), [
                        *[r.seq for r in part],
                        *[v for r in part for v in (r.seq, r.message_id, r.token)],
                        queue, now])]
            if len(known) < len(receipts):
                pairs = json.dumps([[r.message_id, r.token] for r in receipts if r.seq is None])
                found += [Acked(*r) for r in conn.execute(Q["message_ack_pairs"], {
                    "pairs": pairs, "queue": queue, "now": now})]
        late = sum(1 for a in found if a.late)
        if late:
            conn.execute(Q["count_late"], {"queue": queue, "n": late})
        return found

    def ack_in_time(self, tx: Tx, receipts: Sequence[Receipt]) -> bool:
        """Deletes that return nothing, checked by their count. In a queue whose acks
        found keys, a statement before each delete frees the next message of the keys
        it deletes (rule 17), so keyed acks skip RETURNING too; elsewhere the delete
        takes messages without a key only, and a keyed one goes through ``ack``."""
        conn, now, queue = tx.conn, tx.now, receipts[0].queue
        freed = queue in self.keyed
        if len(receipts) == 1:  # nothing to roll back on a miss: the statements agree
            one = receipts[0]
            if one.seq is None:
                return False
            args = {"seq": one.seq, "id": one.message_id, "token": one.token,
                    "queue": queue, "now": now, "keys_freed": freed}
            if freed:
                conn.execute(Q["key_release_acked"], args)
            return bool(conn.execute(Q["message_ack_in_time"], args).rowcount)
        if not _one_claim(receipts):
            return False
        for start in range(0, len(receipts), _ACK_CHUNK):
            part = receipts[start:start + _ACK_CHUNK]
            seqs = [r.seq for r in part]
            params = [*seqs, part[0].token, *[r.message_id for r in part], queue, now]
            if freed:
                conn.execute(_for_rows("keys_release_acked", len(part)),
                             [now, *params, queue, *seqs])
            deleted = conn.execute(_for_rows("message_ack_claim_in_time", len(part)),
                                   [*params, freed]).rowcount
            if deleted != len(part):
                if not deleted and not start:  # nothing changed
                    return False
                raise FastPathMissed
        return True

    def extend(self, tx: Tx, receipts: Sequence[Receipt], seconds: float | None,
               ) -> dict[tuple[str, str], float]:
        conn, found = tx.conn, {}
        for r in receipts:
            row = conn.execute(Q["message_extend"], {
                "id": r.message_id, "seq": r.seq, "queue": r.queue, "token": r.token,
                "now": tx.now, "seconds": seconds}).fetchone()
            if row is not None:
                found[(r.message_id, r.token)] = float(row[0])
        return found

    # -- waiting -----------------------------------------------------------------------

    def wait(self, queues: Sequence[str], timeout: float) -> None:
        # PRAGMA data_version changes when another connection commits. The version last
        # seen is kept per thread, so a commit between an empty claim and this wait still
        # wakes us. Between checks the thread sleeps on inotify (a write to the database's
        # folder wakes it at once, idle costs nothing) or, where that is missing, polls.
        conn = self._connection()
        local = self._local
        names = json.dumps(list(queues))
        deadline = time.monotonic() + timeout
        recheck = 0.0
        eager_until = 0.0
        while True:
            now = time.monotonic()
            current = self._patiently(
                lambda: conn.execute("PRAGMA data_version").fetchone()[0])
            changed = local.version is not None and current != local.version
            local.version = current
            if changed or now >= recheck:
                # Time alone makes messages due (delays, ended leases): look now and then.
                recheck = now + _RECHECK
                args = {"queues": names, "now": self._clock()}
                if self._patiently(partial(_fetch_one, conn, Q["claimable"], args)):
                    return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            watch = self._watch()
            if watch is None or time.monotonic() < eager_until:
                time.sleep(min(self._poll_interval, remaining))
            elif watch.wait(min(remaining, recheck - time.monotonic())):
                # A write was seen; its commit may land a moment later without another
                # event, so poll briefly before sleeping on the folder again.
                eager_until = time.monotonic() + _EAGER

    def _watch(self) -> FolderWatch | None:
        local = self._local
        if local.watch is None and not local.watch_failed:
            local.watch = FolderWatch.open(os.path.dirname(self.path))
            local.watch_failed = local.watch is None
        return local.watch

    def close(self) -> None:
        conn = self._local.conn
        if conn is not None and self._local.generation == Forks.generation:
            conn.close()
        self._local.conn = None


def SQLiteBackend(path: str, **options: Any) -> SqlBackend:
    """hailq on one SQLite file: the storage core over the SQLite dialect."""
    return SqlBackend(SQLiteDialect(path, **options))


_ATTEMPT = operator.itemgetter(ClaimedRow._fields.index("attempt"))
_SEQ = operator.itemgetter(ClaimedRow._fields.index("seq"))


def _one_claim(receipts: Sequence[Receipt]) -> bool:
    """Several receipts of one claim (their positions known), each message named once,
    all naming one queue (a receipt naming another is lost, which the shortcut's one
    queue parameter would not say)."""
    seqs = {r.seq for r in receipts}
    return (len(receipts) > 1 and None not in seqs and len(seqs) == len(receipts)
            and len({r.token for r in receipts}) == 1
            and len({r.queue for r in receipts}) == 1)


@functools.lru_cache(maxsize=256)
def _for_rows(name: str, n: int) -> str:
    """Statement ``name`` for ``n`` rows: ``{marks}`` becomes one ``?`` per row,
    ``{receipts}`` one ``(?, ?, ?)`` per row (plain parameters, no JSON to parse) and
    ``{rows}`` one row of eleven."""
    return Q[name].replace("{marks}", ",".join("?" * n)).replace(
        "{receipts}", ",".join(["(?, ?, ?)"] * n)).replace(
        "{whens}", " WHEN ? THEN ?" * n).replace("{rows}", ",".join([_ROW] * n))


_ROW = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"


def _fetch_one(conn: sqlite3.Connection, sql: str, params: dict[str, Any]) -> Any:
    return conn.execute(sql, params).fetchone()
