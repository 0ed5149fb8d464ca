"""Embedded SQLite: many processes on one machine share one database file.

Writes start with ``BEGIN IMMEDIATE`` so contention waits in SQLite's busy
handler instead of failing; every thread and every forked process opens its
own connection. Sends commit with ``synchronous=FULL`` (durable before
``send`` returns); leases and acks commit with ``NORMAL``: losing one on power
failure only causes a redelivery, which at-least-once allows.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import secrets
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from hailq._time import Clock, system_clock
from hailq.backends import rows
from hailq.backends.base import (
    AckParams,
    BuildCopies,
    ClaimedRow,
    ClaimParams,
    DeadListParams,
    ExtendParams,
    NackParams,
    NewMessage,
    RedriveParams,
)
from hailq.backends.sqlfile import load_migrations, load_queries
from hailq.backends.sqlite.watch import FolderWatch
from hailq.errors import InvalidArgument, LeaseLost, SchemaError, StorageError
from hailq.models import DeadMessage, PeekedMessage, QueueStats, Subscription, WorkerInfo
from hailq.policy.ordering import sort_key

Q = load_queries("hailq.backends.sqlite")
MIGRATIONS = load_migrations("hailq.backends.sqlite")
SCHEMA_TABLE = (
    "CREATE TABLE IF NOT EXISTS hailq_schema ("
    "version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)"
)
_MAINTAIN_EVERY = 0.05  # seconds between claim-time upkeep runs per queue and process
_REOPEN_AFTER = {8, 10, 14}  # SQLITE_READONLY, SQLITE_IOERR, SQLITE_CANTOPEN
_BUSY = {5, 6}  # SQLITE_BUSY, SQLITE_LOCKED
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


class _Forks:
    """How many forks this process is from its start: a connection or lock made in
    another generation belongs to the parent. Counting at fork replaces a getpid
    system call on every transaction."""

    generation = 0

    @classmethod
    def count(cls) -> None:
        cls.generation += 1


os.register_at_fork(after_in_child=_Forks.count)


class _Local(threading.local):
    generation: int = -1
    conn: sqlite3.Connection | None = None
    synchronous: str = ""
    version: int | None = None
    watch: FolderWatch | None = None
    watch_failed: bool = False


class _ForkSafeLock:
    """A re-entrant lock that a forked child gets fresh (a parent thread may have held it)."""

    def __init__(self) -> None:
        self._generation = _Forks.generation
        self._lock = threading.RLock()

    def __enter__(self) -> None:
        if self._generation != _Forks.generation:
            self._generation, self._lock = _Forks.generation, threading.RLock()
        self._lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


class _Transaction:
    """One write transaction of a backend. A class, not a generator: every receive and
    every ack opens one, and a generator-based context manager cost a tenth of a
    one-message cycle."""

    __slots__ = ("_backend", "_conn", "_durable")

    def __init__(self, backend: SQLiteBackend, durable: bool) -> None:
        self._backend = backend
        self._durable = durable

    def __enter__(self) -> sqlite3.Connection:
        backend = self._backend
        conn = self._conn = backend._connection()
        wanted = backend._send_sync if self._durable else "NORMAL"
        # Threads of one process take turns on a lock first: handing over a Python lock is
        # immediate, while waiting on SQLite's file lock means sleeping and retrying.
        backend._writer.__enter__()
        try:
            if backend._local.synchronous != wanted:
                conn.execute(f"PRAGMA synchronous={wanted}")
                backend._local.synchronous = wanted
            backend._begin(conn)
        except BaseException as exc:
            backend._writer.__exit__()
            if isinstance(exc, sqlite3.Error):
                raise backend._storage_error(exc) from None
            raise
        return conn

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: object) -> None:
        try:
            if exc is None:
                try:
                    self._conn.execute("COMMIT")
                    return
                except BaseException as failed:
                    self._roll_back(failed)
                    raise
            self._roll_back(exc)
        finally:
            self._backend._writer.__exit__()

    def _roll_back(self, exc: BaseException) -> None:
        if self._conn.in_transaction:
            self._conn.execute("ROLLBACK")
        if isinstance(exc, sqlite3.Error):
            raise self._backend._storage_error(exc) from None


class SQLiteBackend:
    """hailq on one SQLite file (``sqlite:///path/to/file.db``)."""

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
        self._local = _Local()
        self._writer = _ForkSafeLock()
        self._inserts = 0
        self._maintained: dict[str, float] = {}

    # -- connections -------------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        local = self._local
        if local.conn is None or local.generation != _Forks.generation:
            # A connection inherited through fork is dropped, never used or closed here.
            local.conn = self._open()
            local.generation = _Forks.generation
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
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if mode.lower() != "wal":
                raise StorageError(f"SQLite database {self.path}: could not switch to WAL ({mode})")
            # From here on a busy database is waited for in ``_patiently``, not in SQLite's
            # busy handler, whose sleeps grow to 100 ms: far longer than a hailq write holds
            # the lock. Setting it once saves two PRAGMAs per transaction.
            conn.execute("PRAGMA busy_timeout=0")
        except sqlite3.Error as exc:
            raise self._storage_error(exc) from None
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
        return StorageError(f"SQLite database {self.path}: {exc}")

    def _transaction(self, durable: bool) -> _Transaction:
        """A write transaction (``with``): ``BEGIN IMMEDIATE`` ... ``COMMIT``, rolled
        back on any error; sends commit durably, leases and acks with ``NORMAL``."""
        return _Transaction(self, durable)

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
                if getattr(exc, "sqlite_errorcode", 0) & 0xFF not in _BUSY:
                    raise
                now = time.monotonic()
                if not deadline:
                    deadline = now + self._busy_timeout
                elif now > deadline:
                    raise StorageError(
                        f"SQLite database {self.path}: still busy after "
                        f"{self._busy_timeout:g} s: another connection holds the write "
                        "lock (another process, or a transaction of yours left open, "
                        "e.g. after send(connection=...) without commit)") from None
            time.sleep(pause)
            pause = min(pause * 1.5, 0.005)

    def _read(self, sql: str, params: dict[str, Any]) -> list[Any]:
        try:
            conn = self._connection()
            return self._patiently(lambda: conn.execute(sql, params).fetchall())
        except sqlite3.Error as exc:
            raise self._storage_error(exc) from None

    # -- schema ------------------------------------------------------------------------

    def schema_migrate(self) -> int:
        with self._transaction(durable=True) as conn:
            conn.execute(SCHEMA_TABLE)
            current = conn.execute("SELECT coalesce(max(version), 0) FROM hailq_schema")
            version = int(current.fetchone()[0])
            if version > len(MIGRATIONS):
                raise SchemaError(
                    f"SQLite database {self.path} has hailq schema version {version}; this "
                    f"hailq knows up to {len(MIGRATIONS)}: upgrade hailq")
            for number, name, sql in MIGRATIONS[version:]:
                for statement in _statements(sql):
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

    # -- queues ------------------------------------------------------------------------

    def queue_save(self, name: str, settings_json: str, aging: float | None,
                   resort: bool) -> None:
        with self._transaction(durable=True) as conn:
            conn.execute(Q["queue_save"], {"name": name, "settings": settings_json,
                                           "now": self._clock()})
            conn.execute(Q["counters_create"], {"queue": name})
            if resort:
                conn.execute(Q["queue_resort"], {"queue": name, "aging": aging})

    def queue_load(self, name: str) -> str | None:
        found = self._read(Q["queue_load"], {"name": name})
        return str(found[0][0]) if found else None

    def queue_list(self) -> list[tuple[str, str]]:
        return [(str(n), str(s)) for n, s in self._read(Q["queue_list"], {})]

    # -- sending -----------------------------------------------------------------------

    def message_insert(self, messages: Sequence[NewMessage],
                       connection: Any = None) -> list[str]:
        if connection is not None:
            conn = self._check_foreign(connection)
            try:
                return self._insert(conn, messages, self._clock())
            except sqlite3.Error as exc:
                raise self._storage_error(exc) from None
        with self._transaction(durable=True) as conn:
            return self._insert(conn, messages, self._clock())

    def _check_foreign(self, connection: Any) -> sqlite3.Connection:
        if not isinstance(connection, sqlite3.Connection):
            raise InvalidArgument(
                "connection= must be a sqlite3.Connection to the broker's database file, "
                f"got {type(connection).__name__}")
        files = [row[2] for row in connection.execute("PRAGMA database_list") if row[1] == "main"]
        if not files or os.path.realpath(files[0]) != os.path.realpath(self.path):
            raise InvalidArgument(
                f"connection= is open on {files[0] if files else 'no file'}, not on the "
                f"broker's database {self.path}")
        if connection.isolation_level is None and not connection.in_transaction:
            raise InvalidArgument(
                "connection= is in autocommit mode with no open transaction; run BEGIN first "
                "so the message commits with your transaction")
        return connection

    def _insert(self, conn: sqlite3.Connection, messages: Sequence[NewMessage],
                now: float) -> list[str]:
        ids: list[str] = []
        fresh: list[NewMessage] = []
        for m in messages:
            if m.dedup_id is not None:
                hit = conn.execute(Q["dedup_lookup"], {"queue": m.queue, "dedup_id": m.dedup_id,
                                                       "now": now}).fetchone()
                if hit is not None:
                    ids.append(str(hit[0]))
                    continue
                conn.execute(Q["dedup_save"], {"queue": m.queue, "dedup_id": m.dedup_id,
                                               "id": m.id, "now": now,
                                               "dedup_window": m.dedup_window})
            fresh.append(m)
            ids.append(m.id)
        # In order, one row at a time as far as SQLite is concerned: a keyed message sees
        # the earlier ones of the same batch.
        conn.executemany(Q["message_insert"], [{
            "id": m.id, "queue": m.queue, "body": m.body, "body_kind": m.body_kind,
            "headers": m.headers, "priority": m.priority, "ordering_key": m.ordering_key,
            "sort_key": sort_key(m.priority, now + m.delay, m.aging),
            "now": now, "delay": m.delay} for m in fresh])
        for queue, n in Counter(m.queue for m in fresh).items():
            conn.execute(Q["count_sent"], {"queue": queue, "n": n})
        self._inserts += 1
        if self._inserts % 1000 == 1:
            conn.execute(Q["dedup_prune"], {"now": now})
        return ids

    def topic_publish(self, topic: str, build: BuildCopies,
                      connection: Any = None) -> list[str]:
        if connection is not None:  # the caller's transaction: every copy or none
            conn = self._check_foreign(connection)
            try:
                return self._insert(conn, build(self._subscriptions(conn, topic)),
                                    self._clock())
            except sqlite3.Error as exc:
                raise self._storage_error(exc) from None
        with self._transaction(durable=True) as conn:
            subs = self._subscriptions(conn, topic)
            return self._insert(conn, build(subs), self._clock())

    # -- receiving ---------------------------------------------------------------------

    def message_claim(self, params: ClaimParams) -> list[ClaimedRow]:
        return self.message_ack_claim((), params)[1]

    def message_ack_claim(self, acks: Sequence[AckParams], params: ClaimParams,
                          ) -> tuple[list[bool | None], list[ClaimedRow]]:
        return _fast_first(lambda fast: self._ack_claim(acks, params, fast))

    def _ack_claim(self, acks: Sequence[AckParams], params: ClaimParams, fast: bool,
                   ) -> tuple[list[bool | None], list[ClaimedRow]]:
        with self._transaction(durable=False) as conn:
            now = self._clock()
            acked = self._ack(conn, acks, now, fast) if acks else []
            maintained = now - self._maintained.get(params.queue, 0.0) >= _MAINTAIN_EVERY
            if maintained:
                self._maintain(conn, params, now)
            found = self._claim(conn, params, now)
            if not found and not maintained:
                self._maintain(conn, params, now)
                found = self._claim(conn, params, now)
            claimed = [ClaimedRow.from_returning(r) for r in found]
            redelivered = sum(1 for r in claimed if r.attempt > 1)
            if redelivered:
                conn.execute(Q["count_redelivered"], {"queue": params.queue, "n": redelivered})
        return acked, claimed

    def queue_upkeep(self, params: ClaimParams) -> None:
        with self._transaction(durable=False) as conn:
            self._maintain(conn, params, self._clock())

    def _maintain(self, conn: sqlite3.Connection, params: ClaimParams, now: float) -> None:
        """Claim-time upkeep, no sweeper needed: due messages become ready, ended leases end."""
        self._maintained[params.queue] = now
        conn.execute(Q["scheduled_promote"], {"queue": params.queue, "now": now})
        self._expire(conn, params, now)

    def _claim(self, conn: sqlite3.Connection, params: ClaimParams, now: float) -> list[Any]:
        n = params.max_messages
        if params.max_in_flight is not None:
            leased = conn.execute(Q["in_flight"], {"queue": params.queue}).fetchone()[0]
            n = min(n, params.max_in_flight - int(leased))
        if n <= 0:
            return []
        token = secrets.token_hex(8)
        lease_until = now + params.lease
        found = conn.execute(Q["message_claim"], {
            "queue": params.queue, "n": n, "token": token, "lease_until": lease_until,
        }).fetchall()
        if found:
            conn.execute(_for_rows("message_claim_mark", len(found)),
                         [token, lease_until, *[r[10] for r in found]])
        return found

    def _expire(self, conn: sqlite3.Connection, params: ClaimParams, now: float) -> None:
        park = 1 if params.on_dead == "park" else 0
        ended = conn.execute(Q["leases_expire"], {"queue": params.queue, "now": now,
                                                  "max_attempts": params.max_attempts,
                                                  "park": park}).fetchall()
        dead = [key for state, key in ended if state == "dead"]
        if dead:
            conn.execute(Q["count_dead"], {"queue": params.queue, "dead": len(dead)})
            for key in dead:
                if key is not None and not park:
                    self._release(conn, params.queue, key, now)

    def _release(self, conn: sqlite3.Connection, queue: str, key: str, now: float) -> None:
        conn.execute(Q["key_release"], {"queue": queue, "key": key, "now": now})

    def message_wait(self, queues: Sequence[str], timeout: float) -> None:
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

    # -- finishing ---------------------------------------------------------------------

    def message_ack(self, acks: Sequence[AckParams]) -> list[bool | None]:
        def run(fast: bool) -> list[bool | None]:
            with self._transaction(durable=False) as conn:
                return self._ack(conn, acks, self._clock(), fast)

        return _fast_first(run)

    def _ack(self, conn: sqlite3.Connection, acks: Sequence[AckParams],
             now: float, fast: bool = False) -> list[bool | None]:
        """Delete the rows the receipts still lease; per receipt False (in time), True
        (late) or None (lost). With ``fast``, batches of one claim try
        ``message_ack_claim_in_time`` first and raise _NotAllInTime when it misses a row:
        the caller rolls back and calls again without ``fast``."""
        if len(acks) == 1:  # one message, the most common ack: nothing to group
            one = acks[0]
            args = {"seq": one.seq, "id": one.message_id, "token": one.token,
                    "queue": one.queue, "now": now}
            if one.key_known and one.seq is not None and conn.execute(
                    Q["message_ack_in_time"], args).rowcount:
                if one.ordering_key is not None:
                    self._release(conn, one.queue, one.ordering_key, now)
                return [False]
            found = conn.execute(Q["message_ack_one"], args).fetchall()
            self._acked(conn, one.queue, found, now)
            return [bool(found[0][2])] if found else [None]
        if fast and _one_claim(acks):
            self._ack_in_time(conn, acks, now)
            return [False] * len(acks)
        by_queue: dict[str, list[AckParams]] = {}
        for a in acks:
            by_queue.setdefault(a.queue, []).append(a)
        # By receipt (id and token), not id: a stale receipt beside the current one of
        # the same message gets None, not the current one's answer.
        outcome: dict[tuple[str, str], bool] = {}
        for queue, group in by_queue.items():
            known = [a for a in group if a.seq is not None]  # found by position
            found = []
            for start in range(0, len(known), _ACK_CHUNK):
                part = known[start:start + _ACK_CHUNK]
                found += conn.execute(_for_rows("message_ack_seq", len(part)), [
                    *[a.seq for a in part],
                    *[v for a in part for v in (a.seq, a.message_id, a.token)],
                    queue, now]).fetchall()
            if len(known) < len(group):
                pairs = json.dumps([[a.message_id, a.token] for a in group if a.seq is None])
                found += conn.execute(Q["message_ack"], {"pairs": pairs, "queue": queue,
                                                         "now": now}).fetchall()
            self._acked(conn, queue, found, now)
            outcome.update({(r[0], r[3]): bool(r[2]) for r in found})
        return [outcome.get((a.message_id, a.token)) for a in acks]

    def _ack_in_time(self, conn: sqlite3.Connection, acks: Sequence[AckParams],
                     now: float) -> None:
        queue = acks[0].queue
        for start in range(0, len(acks), _ACK_CHUNK):
            part = acks[start:start + _ACK_CHUNK]
            deleted = conn.execute(_for_rows("message_ack_claim_in_time", len(part)), [
                *[a.seq for a in part], part[0].token, *[a.message_id for a in part],
                queue, now]).rowcount
            if deleted != len(part):
                raise _NotAllInTime
        self._acked(conn, queue, [(a.message_id, a.ordering_key, False) for a in acks], now)

    def _acked(self, conn: sqlite3.Connection, queue: str, found: list[Any],
               now: float) -> None:
        """After acks of ``queue`` deleted ``found`` (id, key, late, ...): free the keys'
        next messages, count the late acks."""
        late = 0
        keys = set()
        for row in found:
            key, was_late = row[1], row[2]
            late += was_late
            if key is not None:
                keys.add(key)
        for key in sorted(keys):
            self._release(conn, queue, key, now)
        if late:
            conn.execute(Q["count_late"], {"queue": queue, "n": late})

    @contextmanager
    def message_ack_transaction(self, ack: AckParams) -> Iterator[sqlite3.Connection]:
        # The ack goes first: it fences the message (nobody else can lease it while this
        # write transaction is open) and fails fast when the lease is already lost.
        with self._transaction(durable=True) as conn:
            if self._ack(conn, [ack], self._clock())[0] is None:
                raise LeaseLost(f"message {ack.message_id} was received again or is gone; "
                                "the transaction was rolled back")
            yield conn

    def message_nack(self, params: NackParams) -> bool:
        with self._transaction(durable=False) as conn:
            now = self._clock()
            park = 1 if params.on_dead == "park" else 0
            row = conn.execute(Q["message_nack"], {
                "id": params.message_id, "seq": params.seq, "queue": params.queue,
                "token": params.token, "now": now, "delay": params.delay,
                "error": params.error or "nacked", "max_attempts": params.max_attempts,
                "aging": params.aging,
                "park": park, "dead": 1 if params.dead else 0, "spare": int(params.spare),
            }).fetchone()
            if row is None:
                return False
            state, key = row
            dead = state == "dead"
            conn.execute(Q["count_nacked"], {"queue": params.queue, "dead": int(dead)})
            if dead and key is not None and not park:
                self._release(conn, params.queue, key, now)
            return True

    def message_attempt(self, queue: str, message_id: str, token: str,
                        seq: int | None) -> int | None:
        found = self._read(Q["message_attempt"], {"queue": queue, "id": message_id,
                                                  "token": token, "seq": seq})
        return int(found[0][0]) if found else None

    def message_extend(self, extends: Sequence[ExtendParams]) -> list[float | None]:
        with self._transaction(durable=False) as conn:
            now = self._clock()
            results: list[float | None] = []
            for e in extends:
                row = conn.execute(Q["message_extend"], {
                    "id": e.message_id, "seq": e.seq, "queue": e.queue, "token": e.token,
                    "now": now, "seconds": e.seconds,
                    "max_attempts": e.max_attempts}).fetchone()
                results.append(None if row is None else float(row[0]))
        return results

    # -- operators ---------------------------------------------------------------------

    def message_peek(self, queue: str, limit: int) -> list[PeekedMessage]:
        found = self._read(Q["message_peek"], {"queue": queue, "limit": limit,
                                                "now": self._clock()})
        return [rows.peeked(queue, r) for r in found]

    def dead_list(self, params: DeadListParams) -> list[DeadMessage]:
        now = self._clock()
        before = None if params.older_than is None else now - params.older_than
        found = self._read(Q["dead_list"], {
            "queue": params.queue, "ordering_key": params.ordering_key, "now": now,
            "dead_before": before, "error": params.error_contains, "limit": params.limit})
        return [rows.dead_letter(params.queue, r) for r in found]

    def dead_redrive(self, params: RedriveParams) -> int:
        ids = json.dumps(list(params.ids or []))
        every = 1 if params.ids is None else 0
        with self._transaction(durable=True) as conn:
            now = self._clock()
            keys = [r[0] for r in conn.execute(Q["dead_keys"], {"queue": params.queue,
                                                                 "ids": ids, "all": every})]
            count = conn.execute(Q["dead_redrive"], {"queue": params.queue, "ids": ids,
                                                     "all": every, "now": now,
                                                     "aging": params.aging}).rowcount
            for key in keys:
                self._release(conn, params.queue, key, now)
        return int(count)

    def message_purge(self, queue: str, dead: bool) -> int:
        with self._transaction(durable=True) as conn:
            now = self._clock()
            if dead:
                gone = conn.execute(Q["purge_dead"], {"queue": queue}).fetchall()
                for key in {k for k, parked in gone if k is not None and parked}:
                    self._release(conn, queue, key, now)
                count = len(gone)
            else:
                count = int(conn.execute(Q["purge_live"], {"queue": queue}).rowcount)
            conn.execute(Q["count_purged"], {"queue": queue, "n": count})
            return count

    def queue_stats(self, queue: str) -> QueueStats:
        now = self._clock()
        row = self._read(Q["stats"], {"queue": queue, "now": now})[0]
        parked = [r[0] for r in self._read(Q["stats_parked"], {"queue": queue, "now": now})]
        return rows.stats(queue, row, now, parked)

    # -- topics ------------------------------------------------------------------------

    def topic_save(self, topic: str) -> None:
        with self._transaction(durable=True) as conn:
            conn.execute(Q["topic_save"], {"name": topic, "now": self._clock()})

    def topic_list(self) -> list[str]:
        return [str(r[0]) for r in self._read(Q["topic_list"], {})]

    def subscription_save(self, subscription: Subscription) -> None:
        with self._transaction(durable=True) as conn:
            conn.execute(Q["subscription_save"], {
                "topic": subscription.topic, "queue": subscription.queue,
                "filter": None if subscription.filter is None else json.dumps(
                    subscription.filter, sort_keys=True),
                "now": self._clock()})

    def subscription_list(self, topic: str) -> list[Subscription]:
        return self._subscriptions(self._connection(), topic)

    def _subscriptions(self, conn: sqlite3.Connection, topic: str) -> list[Subscription]:
        found = self._patiently(
            lambda: conn.execute(Q["subscription_list"], {"topic": topic}).fetchall())
        return [Subscription(t, q, None if f is None else json.loads(f)) for t, q, f in found]

    # -- workers -----------------------------------------------------------------------

    def worker_save(self, worker: WorkerInfo) -> None:
        with self._transaction(durable=False) as conn:
            conn.execute(Q["worker_save"], {
                "id": worker.id, "host": worker.host, "pid": worker.pid,
                "queues": json.dumps(worker.queues), "concurrency": worker.concurrency,
                "in_flight": worker.in_flight, "started_at": worker.started_at,
                "now": self._clock(), "state": worker.state})

    def worker_list(self) -> list[WorkerInfo]:
        return [WorkerInfo(i, h, p, json.loads(q), c, f, s, seen, st)
                for i, h, p, q, c, f, s, seen, st in self._read(Q["worker_list"], {})]

    def worker_prune(self, before: float) -> int:
        with self._transaction(durable=False) as conn:
            return int(conn.execute(Q["worker_prune"], {"before": before}).rowcount)

    def close(self) -> None:
        conn = self._local.conn
        if conn is not None and self._local.generation == _Forks.generation:
            conn.close()
        self._local.conn = None


def _statements(script: str) -> Iterator[str]:
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            if buffer.strip():
                yield buffer
            buffer = ""
    if buffer.strip() and not all(
            ln.strip().startswith("--") or not ln.strip() for ln in buffer.splitlines()):
        raise SchemaError(f"incomplete SQL statement in migration: {buffer[:80]!r}")


class _NotAllInTime(Exception):
    """A fast batch ack deleted fewer rows than it was given: roll back, ack row by row."""


def _fast_first(run: Callable[[bool], _T]) -> _T:
    """``run(True)``, a transaction that tries the fast batch ack; when that raised
    _NotAllInTime (rolled back, nothing written), ``run(False)``."""
    try:
        return run(True)
    except _NotAllInTime:
        return run(False)


def _one_claim(acks: Sequence[AckParams]) -> bool:
    """Several acks of Message objects (position and key known) of one claim of one
    queue, each message named once."""
    first = acks[0]
    return (len(acks) > 1
            and all(a.key_known and a.seq is not None and a.token == first.token
                    and a.queue == first.queue for a in acks)
            and len({a.seq for a in acks}) == len(acks))


@functools.lru_cache(maxsize=256)
def _for_rows(name: str, n: int) -> str:
    """Statement ``name`` for ``n`` rows: ``{marks}`` becomes one ``?`` per row and
    ``{receipts}`` one ``(?, ?, ?)`` per row (plain parameters, no JSON to parse)."""
    return Q[name].replace("{marks}", ",".join("?" * n)).replace(
        "{receipts}", ",".join(["(?, ?, ?)"] * n))


def _fetch_one(conn: sqlite3.Connection, sql: str, params: dict[str, Any]) -> Any:
    return conn.execute(sql, params).fetchone()
