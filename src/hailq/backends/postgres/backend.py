"""The PostgreSQL dialect: many machines share the work.

Connections, transactions and fast paths only; what happens in which order is
``backends/core.py``'s. Claims use ``FOR UPDATE SKIP LOCKED`` in one indexed
statement; every deadline uses the database clock. Sends and operators'
changes commit synchronously (durable before ``send`` returns); leases and
acks relax their own transaction's commit, since losing one to a crash only
causes a redelivery. Connection failures (a restarted server, killed sessions)
are retried on fresh connections for a few seconds, then reported as
StorageError; a call whose outcome the failure left unknown is never re-run
blindly (see ``core.Dialect.work``). No call outlives its ``timeout``
(``deadline.py``). An outage is logged once when it begins, at most every 30 s while it
lasts, and once when it ends (``hailq/outage.py``). Nothing relies on session state,
so a transaction pooler (PgBouncer) may hand each statement to another server
connection; through one, prepared statements are off and LISTEN takes a direct
connection or none; a URL that does not say so turns prepared statements off at the
pooler's first complaint.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from operator import itemgetter
from typing import Any, TypeVar, cast

import psycopg
import psycopg.errors
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool

from hailq.backends.base import ClaimedRow, NewMessage, Receipt
from hailq.backends.dialect import Acked, Dialect, Outcome, Tx
from hailq.backends.history import Mark
from hailq.backends.postgres.calls import NOT_PREPARED, Owned, PooledCalls
from hailq.backends.postgres.deadline import Watchdog, with_defaults
from hailq.backends.postgres.listener import Listener
from hailq.backends.postgres.poollog import PoolLogs
from hailq.backends.postgres.render import RELAXED, render
from hailq.backends.sql import SqlBackend
from hailq.backends.sqlfile import load_migrations
from hailq.errors import InvalidArgument, SchemaError
from hailq.outage import Outage

T = TypeVar("T")
log = logging.getLogger("hailq.postgres")
_MIGRATIONS = load_migrations("hailq.backends.postgres")
SCHEMA_PATTERN = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_WAIT_SLACK = 2.0  # seconds a waiter's registration outlives its longest wait


def _check_schema(schema: str) -> str:
    """A schema name kept as given: PostgreSQL would cut one over 63 bytes short and a dot
    would name a schema inside another, so both are refused rather than changed."""
    if not SCHEMA_PATTERN.fullmatch(schema):
        raise InvalidArgument(
            f"invalid PostgreSQL schema name {schema!r}: use 1-63 characters from "
            "a-z 0-9 _, starting with a letter or _ (names psql needs no quotes for)")
    return schema


def _channel(schema: str) -> str:
    """The LISTEN/NOTIFY channel of a schema, within PostgreSQL's 63-byte identifiers."""
    name = f"hailq_{schema}"
    if len(name) <= 63:
        return name
    return f"hailq_{schema[:40]}_{hashlib.sha1(schema.encode()).hexdigest()[:16]}"


class _Tx(Tx):
    """A pooled connection at work: statements autocommit unless inside ``atomic()``."""

    __slots__ = ("_q", "conn", "now")
    conn: psycopg.Connection[Any]

    def __init__(self, conn: psycopg.Connection[Any], q: dict[str, str]) -> None:
        self.conn = conn
        self.now = None  # statements read the database's clock (rule 11)
        self._q = q

    def run(self, name: str, params: Mapping[str, Any]) -> list[Any]:
        return self.conn.execute(self._q[name], params).fetchall()

    def exec(self, name: str, params: Mapping[str, Any]) -> int:
        return int(self.conn.execute(self._q[name], params).rowcount)

    def has(self, name: str) -> bool:
        return name in self._q

    def limited(self, name: str, n: int) -> str:
        """The name of statement ``name`` with ``n`` written in as its ``LIMIT {limit}``,
        rendered on first use. Written in, not passed: after five runs PostgreSQL keeps
        a prepared statement's generic plan only if it costs no more than the plans made
        for each run's values, and a generic plan reads a LIMIT parameter as a tenth of
        the table. Once the table was analyzed the claim was planned anew on every call,
        half of its time on the server; now once per connection and batch size."""
        key = f"{name} {n}"
        if key not in self._q:
            self._q[key] = self._q[name].replace("{limit}", str(int(n)))
        return key

    def atomic(self) -> AbstractContextManager[Any]:
        return self.conn.transaction()


class PostgresDialect(PooledCalls, Dialect):
    """hailq in one schema of a PostgreSQL database."""

    acks_plain_apart = True  # statements autocommit: a key-less ack is one round trip
    flavor = "postgres"
    listener_type: type[Listener] = Listener  # hailq.aio's listens on the event loop

    def __init__(self, conninfo: str, *, display: str, schema: str = "hailq",
                 pool_size: int = 10, poll_interval: float = 1.0, timeout: float = 30.0,
                 prepare: bool = True, listen: str | None = "") -> None:
        """``timeout``: seconds any call may take, retries included (rule 31).
        ``prepare``: let psycopg prepare statements it runs often (not through a
        transaction pooler). ``listen``: where LISTEN connects: "" the same URL, a URL of
        its own (a direct one, past a pooler), or None for none (waiters poll)."""
        self._timeout = float(timeout)
        self._conninfo = with_defaults(conninfo, self._timeout)
        self._connect_timeout = int(str(conninfo_to_dict(self._conninfo)["connect_timeout"]))
        self._listen_to = (None if listen is None
                           else with_defaults(listen or conninfo, self._timeout))
        self._listen_here = listen == ""  # LISTEN goes where every statement goes
        self._prepare = prepare
        self._watchdog = Watchdog()
        self.url_for_display = display
        self._outage = Outage(f"PostgreSQL {display}", log)
        self._pool_logs = PoolLogs(self._outage)
        self.schema = _check_schema(schema)
        self._pool_size = max(int(pool_size), 1)
        self._poll_interval = poll_interval
        # Rendered once: psycopg then caches and prepares each query by its text. Leases
        # and acks commit without waiting for the disk, sends and effects durably.
        self.channel = _channel(self.schema)
        self._q = render(self.schema, self.channel, RELAXED)
        self._q_durable = render(self.schema, self.channel, sql.SQL("true"))
        self._pid = -1
        self._durable: ConnectionPool | None = None
        self._fast: ConnectionPool | None = None
        self._listener: Listener | None = None
        self._owned = Owned([], here=not self._closed_when_collected)
        self._waiter = ""  # who waits, as wait_begin registers it: set per process
        self._looks = threading.local()  # per thread: looks in a row that found no sleep

    # -- connections -------------------------------------------------------------------

    def _stop_preparing(self) -> None:
        """Turn prepared statements off for good: a transaction pooler refused one."""
        if not self._prepare:
            return  # another thread's call saw it first
        self._prepare = False  # (two threads that both get here only warn twice)
        log.warning("PostgreSQL %s: a statement prepared on one server connection was "
                    "unknown on another (a transaction pooler such as PgBouncer); hailq "
                    "prepares no statements and polls rather than LISTENs from now on "
                    "(say pooler=transaction in the URL to start so)", self.url_for_display)
        if self._listen_here:
            # A LISTEN through the pooler stays on a server connection that other
            # clients get next: it hears nothing, and fills their notification backlog.
            listener, self._listener, self._listen_to = self._listener, None, None
            if listener is not None:
                listener.close()

    def _listen(self) -> Listener | None:
        """The LISTEN connection's keeper; None when listening is off (listen=off)."""
        self._pools()
        if self._listener is None and self._listen_to is not None:
            self._listener = self.listener_type(self._listen_to, self.channel,
                                      answer_within=min(self._timeout, 5.0),
                                      outage=self._outage if self._listen_here else None)
            self._owned.items.append(self._listener)
        return self._listener

    # -- schema ------------------------------------------------------------------------

    def schema_migrate(self) -> int:
        def run(conn: psycopg.Connection[Any]) -> int:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                             (f"hailq migrate {self.schema}",))
                owner = self._schema_owner(conn)
                if owner == "foreign":
                    raise SchemaError(
                        f"PostgreSQL schema {self.schema} holds objects that are not hailq's; "
                        "hailq installs only into an empty schema or one it created: give it "
                        "a schema of its own with ?schema=NAME")
                ident = sql.Identifier(self.schema)
                conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(ident))
                if owner == "legacy":  # hailq's own table, from before its name said so
                    conn.execute(sql.SQL("ALTER TABLE {}.schema_version RENAME TO "
                                         "hailq_schema_version").format(ident))
                conn.execute(sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {}.hailq_schema_version ("
                    "version integer PRIMARY KEY, name text NOT NULL, "
                    "applied_at timestamptz NOT NULL DEFAULT now())").format(ident))
                found = conn.execute(sql.SQL(
                    "SELECT coalesce(max(version), 0) FROM {}.hailq_schema_version").format(
                        ident)).fetchone()
                version = int(found[0]) if found else 0
                if version > len(_MIGRATIONS):
                    raise SchemaError(
                        f"PostgreSQL schema {self.schema} has hailq schema version {version}; "
                        f"this hailq knows up to {len(_MIGRATIONS)}: upgrade hailq")
                for number, name, text in _MIGRATIONS[version:]:
                    conn.execute(sql.SQL(text).format(
                        schema=ident, channel=sql.Literal(self.channel)))
                    conn.execute(sql.SQL("INSERT INTO {}.hailq_schema_version (version, name) "
                                         "VALUES (%s, %s)").format(ident), (number, name))
                    version = number
                return version

        return self._call(True, run)

    def _schema_owner(self, conn: psycopg.Connection[Any]) -> str:
        """Whose the schema is: ``absent``, ``empty``, ``hailq`` (its version table),
        ``legacy`` (hailq's tables with the version table's old name) or ``foreign``."""
        found = conn.execute(
            "SELECT n.oid IS NOT NULL, to_regclass(%(v)s) IS NOT NULL, "
            "to_regclass(%(old)s) IS NOT NULL AND to_regclass(%(m)s) IS NOT NULL "
            "AND to_regclass(%(c)s) IS NOT NULL, "
            "(SELECT count(*) FROM pg_class WHERE relnamespace = n.oid) "
            "+ (SELECT count(*) FROM pg_proc WHERE pronamespace = n.oid) "
            "+ (SELECT count(*) FROM pg_type WHERE typnamespace = n.oid AND typrelid = 0 "
            "   AND typelem = 0) "
            "FROM (SELECT 1) AS one LEFT JOIN pg_namespace n ON n.nspname = %(s)s",
            {"s": self.schema, "v": f"{self.schema}.hailq_schema_version",
             "old": f"{self.schema}.schema_version", "m": f"{self.schema}.messages",
             "c": f"{self.schema}.counters"}).fetchone()
        exists, current, legacy, objects = found if found else (False, False, False, 0)
        if not exists:
            return "absent"
        if current:
            return "hailq"
        if legacy:
            return "legacy"
        return "empty" if not objects else "foreign"

    def schema_latest(self) -> int:
        return len(_MIGRATIONS)

    def schema_version(self) -> int:
        def run(conn: psycopg.Connection[Any]) -> int:
            owner = self._schema_owner(conn)
            if owner not in ("hailq", "legacy"):
                return 0
            table = "hailq_schema_version" if owner == "hailq" else "schema_version"
            row = conn.execute(sql.SQL("SELECT coalesce(max(version), 0) FROM {}.{}").format(
                sql.Identifier(self.schema), sql.Identifier(table))).fetchone()
            return int(row[0]) if row else 0

        return self._call(False, run, writes=False)

    def clock_now(self) -> float:
        def now(conn: psycopg.Connection[Any]) -> float:
            row = conn.execute(self._q["clock_now"]).fetchone()
            assert row is not None
            return float(row[0])

        return self._call(False, now, writes=False)

    # -- units of work -----------------------------------------------------------------

    def work(self, fn: Callable[[Tx], T], *, durable: bool,
             rerun: Callable[[Tx], T] | None = None) -> T:
        q = self._q_durable if durable else self._q
        return self._call(durable, lambda conn: fn(_Tx(conn, q)),
                          None if rerun is None else lambda conn: rerun(_Tx(conn, q)))

    def read(self, fn: Callable[[Tx], T]) -> T:
        return self._call(False, lambda conn: fn(_Tx(conn, self._q)), writes=False)

    def caller_queries(self) -> Mapping[str, str]:
        return self._q_durable

    @contextmanager
    def effect(self) -> Iterator[tuple[Tx, Any]]:
        # The block, the caller's effect included, has ``timeout`` seconds, and its commit
        # (or rollback) as long again: a commit that never answers is dropped like any.
        pool = self._pools()[0]
        watch = None
        committing = False
        began = time.monotonic()
        try:
            with pool.connection(timeout=min(5.0, self._timeout)) as conn, \
                    self._watchdog.watch(conn, time.monotonic() + self._timeout) as watch, \
                    conn.transaction():
                self._unprepared(conn)
                try:
                    yield _Tx(conn, self._q_durable), conn
                except BaseException:
                    self._watchdog.renew(watch, time.monotonic() + self._timeout)
                    raise
                self._watchdog.renew(watch, time.monotonic() + self._timeout)
                committing = True
        except psycopg.OperationalError as exc:
            if watch is not None and watch.fired:
                raise self._unreachable(self._timed_out(committing), began=began) from None
            raise self._unreachable(self._storage_error(exc, committing), exc,
                                    began=began) from None
        except NOT_PREPARED:
            self._stop_preparing()  # the caller's retry then runs unprepared
            raise

    # -- fast paths --------------------------------------------------------------------

    def insert(self, tx: Tx, messages: Sequence[NewMessage], rerun: bool = False) -> int:
        if len(messages) == 1 and messages[0].ordering_key is None:
            m = messages[0]
            found = tx.run("message_insert_one", {
                "id": m.id, "queue": m.queue, "body": m.body, "kind": m.body_kind,
                "headers": m.headers, "priority": m.priority, "delay": m.delay,
                "dedup_id": m.dedup_id})
        else:
            found = tx.run("message_insert_again" if rerun else "message_insert",
                           insert_args(messages))
        return int(found[0][0])

    def claim(self, tx: Tx, queue: str, n: int, lease: float,
              mark: Mark | None = None) -> list[ClaimedRow]:
        name, consumer = _marked("message_claim", mark)  # rule 40
        return _claimed_rows(tx.run(cast(_Tx, tx).limited(name, n), {
            "queue": queue, "lease": lease, "retain": mark and mark.retain,
            "consumer": consumer}))

    def ack(self, tx: Tx, receipts: Sequence[Receipt]) -> list[Acked]:
        if len(receipts) == 1:
            r = receipts[0]
            found = tx.run("message_ack_one", {"queue": r.queue, "id": r.message_id,
                                               "token": r.token, "seq": r.seq,
                                               "plain": False})
        else:
            found = tx.run("message_ack", {
                "queue": receipts[0].queue, "ids": [r.message_id for r in receipts],
                "tokens": [r.token for r in receipts], "seqs": [r.seq for r in receipts]})
        return [Acked(*row) for row in found]

    def ack_plain(self, tx: Tx, receipts: Sequence[Receipt]) -> Outcome:
        if len(receipts) == 1:
            r = receipts[0]
            return {(r.queue, i, t): bool(late) for i, t, _, late in tx.run(
                "message_ack_one", {"queue": r.queue, "id": r.message_id, "token": r.token,
                                    "seq": r.seq, "plain": True})}
        found = tx.run("message_ack_plain", {
            "queues": [r.queue for r in receipts], "ids": [r.message_id for r in receipts],
            "tokens": [r.token for r in receipts], "seqs": [r.seq for r in receipts]})
        return {(q, i, t): bool(late) for q, i, t, late in found}

    def ack_claim(self, tx: Tx, receipts: Sequence[Receipt], queue: str, n: int,
                  lease: float, mark: Mark | None = None,
                  ) -> tuple[Outcome, list[ClaimedRow]]:
        name, consumer = _marked("message_ack_claim", mark)
        found = tx.run(cast(_Tx, tx).limited(name, n), {
            "queue": queue, "lease": lease, "retain": mark and mark.retain,
            "consumer": consumer,
            "queues": [r.queue for r in receipts], "ids": [r.message_id for r in receipts],
            "tokens": [r.token for r in receipts], "seqs": [r.seq for r in receipts]})
        # An acked row: its queue where a claimed row has the key (see queries.sql).
        acked = {(r[7], r[1], r[2]): bool(r[-1]) for r in found if r[0]}
        return acked, _claimed_rows([r[1:-1] for r in found if not r[0]])

    def extend(self, tx: Tx, receipts: Sequence[Receipt], seconds: float | None,
               ) -> dict[tuple[str, str], float]:
        found: dict[tuple[str, str], float] = {}
        for queue in {r.queue for r in receipts}:
            group = [r for r in receipts if r.queue == queue]
            for i, t, until in tx.run("message_extend", {
                    "queue": queue, "ids": [r.message_id for r in group],
                    "tokens": [r.token for r in group], "seqs": [r.seq for r in group],
                    "seconds": [seconds] * len(group)}):
                found[(i, t)] = float(until)
        return found

    def wake(self, tx: Tx, queues: Iterable[str]) -> None:
        # NOTIFY is sent for new messages only: receivers waiting on a capped queue
        # would otherwise wait for their next poll.
        for queue in sorted(set(queues)):
            tx.conn.execute("SELECT pg_notify(%s, %s)", (self.channel, queue))

    def wait(self, queues: Sequence[str], timeout: float) -> None:
        # NOTIFY wakes us for new and released messages; time alone makes delayed ones
        # due and ends leases, so never sleep past the next such moment. A send notifies
        # only while a receiver is registered as waiting (migration 2), so register
        # first, with the listener's state taken before: a notification that comes
        # between the registration and the wait still ends the wait.
        names = list(queues)
        key = tuple(names)
        listener = self._listen()
        if listener is None:
            # Nobody listens (listen=off): no registration, so sends never notify for
            # this process; the next look is at most poll_interval away.
            self.sleep(max(min(timeout, self._poll_interval), 0.0))
            return
        before = listener.state(key)
        longest = min(timeout, self._poll_interval)
        found = self._call(False, lambda c: c.execute(self._q["wait_begin"], {
            "queues": names, "waiter": self._waiter,
            "seconds": longest + _WAIT_SLACK}).fetchone())
        assert found is not None
        due = float("inf") if found[0] is None else max(float(found[0]), 0.01)
        if int(found[1]) == 0:
            self._looks.busy = 0
            listener.wait_since(key, before, min(longest, due))
            return
        # A message is ready (a capped queue may stay so) or a send is about to commit:
        # look again at once, then after 1, 2, 4 ... ms, up to the usual wait.
        busy = getattr(self._looks, "busy", 0)
        self._looks.busy = min(busy + 1, 20)
        if busy:
            listener.wait_since(key, before, min(longest, due, 0.001 * 2 ** (busy - 1)))

    def close(self) -> None:
        if self._pid != os.getpid():
            return
        self._owned.close()
        self._durable = self._fast = None
        self._listener = None


def PostgresBackend(conninfo: str, **options: Any) -> SqlBackend:
    """hailq in one PostgreSQL schema: the storage core over the PostgreSQL dialect."""
    return SqlBackend(PostgresDialect(conninfo, **options))


def _claimed_rows(found: list[Any]) -> list[ClaimedRow]:
    if len(found) < 2:
        return [tuple.__new__(ClaimedRow, r) for r in found]
    found.sort(key=itemgetter(11, 10))  # RETURNING has no order: back to rule 16's
    # The fencing tokens the claim drew, handed out in that order too, as SQLite does:
    # all were drawn after any earlier lease of these messages and keys, before any later.
    tokens = sorted(map(itemgetter(13), found))
    return [tuple.__new__(ClaimedRow, (*r[:13], t)) for r, t in zip(found, tokens, strict=True)]


def insert_args(messages: Sequence[NewMessage]) -> dict[str, Any]:
    return {
        "ids": [m.id for m in messages], "queues": [m.queue for m in messages],
        "bodies": [m.body for m in messages], "kinds": [m.body_kind for m in messages],
        "headers": [m.headers for m in messages], "priorities": [m.priority for m in messages],
        "keys": [m.ordering_key for m in messages], "delays": [m.delay for m in messages],
        "dedups": [m.dedup_id for m in messages]}


def _marked(name: str, mark: Mark | None) -> tuple[str, str | list[str] | None]:
    """A claim statement's variant for ``mark`` (rule 40) and its consumer parameter:
    none for a queue without history, one text value for one name, an array for a
    worker's slots."""
    if mark is None:
        return name, None
    if len(mark.consumers) == 1:
        return f"{name} retain", mark.consumers[0]
    return f"{name} retain slots", list(mark.consumers)
