"""PostgreSQL: many machines share the work.

Claims use ``FOR UPDATE SKIP LOCKED`` in one indexed statement; every deadline
uses the database clock. Two connection pools: sends and operator changes
commit synchronously (durable before ``send`` returns); leases and acks commit
with ``synchronous_commit = off``, since losing one to a crash only causes a
redelivery. Connection failures (a restarted server, killed sessions) are
retried on fresh connections for a few seconds, then reported as StorageError.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import threading
import time
import weakref
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import psycopg
from psycopg import sql
from psycopg_pool import ConnectionPool, PoolTimeout

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
    delivery_order,
)
from hailq.backends.postgres.listener import Listener
from hailq.backends.sqlfile import load_migrations, load_queries
from hailq.errors import InvalidArgument, LeaseLost, SchemaError, StorageError
from hailq.models import DeadMessage, PeekedMessage, QueueStats, Subscription, WorkerInfo

T = TypeVar("T")
_RAW = load_queries("hailq.backends.postgres")
_MIGRATIONS = load_migrations("hailq.backends.postgres")
SCHEMA_PATTERN = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_RETRY_FOR = 8.0  # seconds an operation keeps retrying through connection failures
_MAINTAIN_EVERY = 0.05  # seconds between claim-time upkeep runs per queue and process


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


class PostgresBackend:
    """hailq in one schema of a PostgreSQL database."""

    def __init__(self, conninfo: str, *, display: str, schema: str = "hailq",
                 pool_size: int = 10, poll_interval: float = 1.0) -> None:
        self._conninfo = conninfo
        self.url_for_display = display
        self.schema = _check_schema(schema)
        self._pool_size = max(int(pool_size), 1)
        self._poll_interval = poll_interval
        # Rendered once: psycopg then caches and prepares each query by its text. Leases
        # and acks commit without waiting for the disk, sends and effects durably.
        self._q = _render(self.schema, _RELAXED)
        self._q_durable = _render(self.schema, sql.SQL("true"))
        self.channel = _channel(self.schema)
        self._pid = -1
        self._durable: ConnectionPool | None = None
        self._fast: ConnectionPool | None = None
        self._listener: Listener | None = None
        self._owned = _Owned([])
        self._maintained: dict[str, float] = {}
        self._inserts = 0

    # -- connections -------------------------------------------------------------------

    def _pools(self) -> tuple[ConnectionPool, ConnectionPool]:
        if self._pid != os.getpid() or self._durable is None or self._fast is None:
            # After fork the parent's pools (and their threads) are unusable: start anew.
            self._probe()
            self._pid = os.getpid()
            self._durable = self._make_pool("durable")
            self._fast = self._make_pool("fast")
            self._listener = None
            self._maintained = {}
            # A backend dropped without close() closes what it opened when it is
            # collected, never leaving it to the pools' own __del__: collected in one of
            # their threads, that one tried to join itself.
            self._owned = _Owned([self._durable, self._fast])
            weakref.finalize(self, self._owned.close)
        return self._durable, self._fast

    def _probe(self) -> None:
        """Connect once directly, so a wrong host, role or database fails at once and
        clearly instead of after the pool's patient retries."""
        try:
            psycopg.connect(self._conninfo, connect_timeout=5).close()
        except psycopg.Error as exc:
            raise self._storage_error(exc) from None

    def _make_pool(self, name: str) -> ConnectionPool:
        # No session settings: through a transaction pooler they would stay on a server
        # connection that another client's transaction gets next.
        return ConnectionPool(
            self._conninfo, min_size=1, max_size=self._pool_size, open=True,
            kwargs={"autocommit": True, "connect_timeout": 5},
            name=f"hailq-{name}", timeout=5, reconnect_timeout=0)

    def _call(self, durable: bool, fn: Callable[[psycopg.Connection[Any]], T],
              rerun: Callable[[psycopg.Connection[Any]], T] | None = None) -> T:
        """Run ``fn`` on a pooled connection; retry on fresh ones after connection failures
        (a restarted server, killed sessions) for up to ``_RETRY_FOR`` seconds.

        A failure after ``fn`` started leaves its outcome unknown: its commit may have
        gone through before the connection broke. Such a call is never re-run blindly:
        the retry runs ``rerun`` (which finds out what the first try did) where given,
        else ``fn`` again, for calls whose re-run cannot change an outcome twice."""
        deadline = time.monotonic() + _RETRY_FOR
        delay = 0.05
        started = False
        while True:
            pool = self._pools()[0 if durable else 1]
            try:
                with pool.connection(timeout=max(deadline - time.monotonic(), 0.5)) as conn:
                    if started and rerun is not None:
                        return rerun(conn)
                    started = True
                    return fn(conn)
            except psycopg.OperationalError as exc:
                if time.monotonic() + delay >= deadline:
                    if isinstance(exc, PoolTimeout):
                        self._probe()  # names the cause (refused, unknown host...) if it can
                    raise self._storage_error(exc) from None
                pool.check()  # drop every broken idle connection, not just this one
                time.sleep(delay)
                delay = min(delay * 2, 1.0)
            except psycopg.Error as exc:
                raise self._storage_error(exc) from None

    def _storage_error(self, exc: BaseException) -> StorageError:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return StorageError(f"PostgreSQL {self.url_for_display}: {text}")

    def _listen(self) -> Listener:
        self._pools()
        if self._listener is None:
            self._listener = Listener(self._conninfo, self.channel)
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

        return self._call(False, run)

    def clock_now(self) -> float:
        return self._call(False, lambda c: float(self._one(c, "clock_now", {})[0]))

    def _one(self, conn: psycopg.Connection[Any], name: str, params: dict[str, Any]) -> Any:
        row = conn.execute(self._q[name], params).fetchone()
        if row is None:
            raise StorageError(f"query {name} returned no row")
        return row

    def _all(self, durable: bool, name: str, params: dict[str, Any]) -> list[Any]:
        return self._call(durable, lambda c: c.execute(self._q[name], params).fetchall())

    # -- queues ------------------------------------------------------------------------

    def queue_save(self, name: str, settings_json: str, aging: float | None,
                   resort: bool) -> None:
        def save(conn: psycopg.Connection[Any]) -> None:
            conn.execute(self._q["queue_save"], {"name": name, "settings": settings_json})
            if resort:
                conn.execute(self._q["queue_resort"], {"queue": name, "aging": aging})
        self._call(True, save)

    def _all_exec(self, name: str, params: dict[str, Any]) -> int:
        return self._call(True, lambda c: c.execute(self._q[name], params).rowcount)

    def queue_load(self, name: str) -> str | None:
        found = self._all(False, "queue_load", {"name": name})
        return str(found[0][0]) if found else None

    def queue_list(self) -> list[tuple[str, str]]:
        return [(str(n), str(s)) for n, s in self._all(False, "queue_list", {})]

    # -- sending -----------------------------------------------------------------------

    def message_insert(self, messages: Sequence[NewMessage],
                       connection: Any = None) -> list[str]:
        if connection is not None:
            conn = self._check_foreign(connection)
            try:
                return self._insert(conn, messages)
            except psycopg.Error as exc:
                raise self._storage_error(exc) from None
        if all(m.dedup_id is None and m.ordering_key is None for m in messages):
            # One autocommit statement: no BEGIN/COMMIT round trips. A re-run after a
            # lost connection skips the rows its first try committed (ON CONFLICT).
            args = _insert_args(messages)
            self._call(True, lambda c: c.execute(self._q["message_insert_counted"], args))
            return [m.id for m in messages]

        def run(rerun: bool) -> Callable[[psycopg.Connection[Any]], list[str]]:
            def insert(conn: psycopg.Connection[Any]) -> list[str]:
                with conn.transaction():
                    return self._insert(conn, messages, rerun=rerun)
            return insert

        return self._call(True, run(False), rerun=run(True))

    def _check_foreign(self, connection: Any) -> psycopg.Connection[Any]:
        if not isinstance(connection, psycopg.Connection):
            raise InvalidArgument("connection= must be a psycopg Connection to the broker's "
                                  f"database, got {type(connection).__name__}")
        with self._pools()[0].connection() as mine:
            ours = (mine.info.dbname, mine.info.port)
        if (connection.info.dbname, connection.info.port) != ours:
            raise InvalidArgument(
                f"connection= is open on database {connection.info.dbname!r} port "
                f"{connection.info.port}, not on the broker's {ours[0]!r} port {ours[1]}")
        idle = connection.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        if connection.autocommit and idle:
            raise InvalidArgument(
                "connection= is in autocommit mode with no open transaction; use "
                "`with connection.transaction():` so the message commits with your work")
        return connection

    def _insert(self, conn: psycopg.Connection[Any], messages: Sequence[NewMessage],
                rerun: bool = False) -> list[str]:
        """Insert ``messages`` in the caller's transaction. With ``rerun`` (the first try's
        connection broke, its commit unknown), a message whose dedup record the first try
        made is not inserted again: it was stored then, and may be consumed already."""
        ids: list[str] = []
        fresh: list[NewMessage] = []
        for m in messages:
            if m.dedup_id is not None:
                owner, made = self._one(conn, "dedup_claim", {
                    "queue": m.queue, "dedup_id": m.dedup_id, "id": m.id,
                    "dedup_window": m.dedup_window})
                if owner != m.id or (rerun and not made):
                    ids.append(str(owner))
                    continue
            fresh.append(m)
            ids.append(m.id)
        if not fresh:
            return ids
        keys = sorted({_lock_key(m.queue, m.ordering_key) for m in fresh
                       if m.ordering_key is not None})
        if keys:
            conn.execute(self._q["keys_lock"], {"keys": keys})
        conn.execute(self._q["message_insert_counted"], _insert_args(fresh))
        self._inserts += 1
        if self._inserts % 1000 == 1:
            conn.execute(self._q["dedup_prune"], {})
        return ids

    def topic_publish(self, topic: str, build: BuildCopies,
                      connection: Any = None) -> list[str]:
        if connection is not None:  # the caller's transaction: every copy or none
            conn = self._check_foreign(connection)
            try:
                copies = build(self._subscriptions(conn, topic))
                return self._insert(conn, copies) if copies else []
            except psycopg.Error as exc:
                raise self._storage_error(exc) from None

        def run(conn: psycopg.Connection[Any]) -> list[str]:
            with conn.transaction():
                subs = self._subscriptions(conn, topic)
                copies = build(subs)
                return self._insert(conn, copies) if copies else []

        return self._call(True, run)

    # -- receiving ---------------------------------------------------------------------

    def message_claim(self, params: ClaimParams) -> list[ClaimedRow]:
        return self.message_ack_claim((), params)[1]

    def message_ack_claim(self, acks: Sequence[AckParams], params: ClaimParams,
                          ) -> tuple[list[bool | None], list[ClaimedRow]]:
        plain = [a for a in acks if a.key_known and a.ordering_key is None]
        keyed = [a for a in acks if not (a.key_known and a.ordering_key is None)]

        def run(conn: psycopg.Connection[Any]) -> tuple[list[bool | None], list[ClaimedRow]]:
            # By receipt (id and token): a stale receipt beside the current one of the
            # same message gets None, not the current one's answer.
            outcome: dict[tuple[str, str], bool | None] = {}
            if keyed:  # keys need their locks and releases: a transaction of their own
                outcome.update(zip(((a.message_id, a.token) for a in keyed),
                                   self._ack(conn, keyed, in_transaction=False), strict=True))
            found: list[ClaimedRow] = []
            due = time.monotonic() - self._maintained.get(params.queue, 0.0) >= _MAINTAIN_EVERY
            if plain and not due and params.max_in_flight is None:
                # Ack and claim in one statement: one round trip, one transaction.
                rows_ = conn.execute(self._q["message_ack_claim"], {
                    **_claim_args(params), "queues": [a.queue for a in plain],
                    "ids": [a.message_id for a in plain],
                    "tokens": [a.token for a in plain],
                    "seqs": [a.seq for a in plain]}).fetchall()
                outcome.update({(r[1], r[2]): bool(r[-1]) for r in rows_ if r[0]})  # id, token
                found = _claimed_rows([r[1:-1] for r in rows_ if not r[0]])
                if not found:
                    found = self._claim_with_upkeep(conn, params)
            else:
                if plain:
                    acked_rows = self._ack_cursor(conn, plain).fetchall()
                    outcome.update({(r[0], r[3]): bool(r[2]) for r in acked_rows})
                found = self._claim_with_upkeep(conn, params)
            self._wake(conn, [a.queue for a in plain if a.wake
                              and outcome.get((a.message_id, a.token)) is not None],
                       committed=True)
            return [outcome.get((a.message_id, a.token)) for a in acks], found

        def rerun(conn: psycopg.Connection[Any],
                  ) -> tuple[list[bool | None], list[ClaimedRow]]:
            results, found = run(conn)
            return self._confirm_gone(conn, acks, results), found

        return self._call(False, run, rerun=rerun)

    def _claim_with_upkeep(self, conn: psycopg.Connection[Any],
                           params: ClaimParams) -> list[ClaimedRow]:
        maintained = False
        if time.monotonic() - self._maintained.get(params.queue, 0.0) >= _MAINTAIN_EVERY:
            self._maintain(conn, params)
            maintained = True
        found = self._claim(conn, params)
        if not found and not maintained:
            self._maintain(conn, params)
            found = self._claim(conn, params)
        return found

    def _ack_cursor(self, conn: psycopg.Connection[Any],
                    acks: Sequence[AckParams]) -> psycopg.Cursor[Any]:
        """Ack messages without a key (of any queues) in one statement."""
        return conn.execute(self._q["message_ack_any"], {
            "queues": [a.queue for a in acks], "ids": [a.message_id for a in acks],
            "tokens": [a.token for a in acks], "seqs": [a.seq for a in acks]})

    def queue_upkeep(self, params: ClaimParams) -> None:
        self._call(False, lambda conn: self._maintain(conn, params))

    def _maintain(self, conn: psycopg.Connection[Any], params: ClaimParams) -> None:
        self._maintained[params.queue] = time.monotonic()
        park = params.on_dead == "park"
        with conn.transaction():
            ended = conn.execute(self._q["maintain"], {
                "queue": params.queue, "max_attempts": params.max_attempts,
                "park": park}).fetchall()
            dead = [key for _, state, key in ended if state == "dead"]
            if dead:
                conn.execute(self._q["count_dead"], {"queue": params.queue, "dead": len(dead)})
                if not park:
                    self._release(conn, params.queue, [k for k in dead if k is not None])

    def _claim(self, conn: psycopg.Connection[Any], params: ClaimParams) -> list[ClaimedRow]:
        args = _claim_args(params)
        if params.max_in_flight is None:
            found = conn.execute(self._q["message_claim"], args).fetchall()
        else:
            # A cap across all consumers: claims of this queue take turns.
            with conn.transaction():
                conn.execute(self._q["in_flight_lock"], {"queue": params.queue})
                leased = int(self._one(conn, "in_flight", {"queue": params.queue})[0])
                room = min(params.max_messages, params.max_in_flight - leased)
                if room <= 0:
                    return []
                args["n"] = room
                found = conn.execute(self._q["message_claim"], args).fetchall()
        return _claimed_rows(found)

    def _release(self, conn: psycopg.Connection[Any], queue: str, keys: Sequence[str]) -> None:
        """Free the next message of each key; the caller holds a transaction."""
        if not keys:
            return
        unique = sorted(set(keys))
        conn.execute(self._q["keys_lock"], {"keys": [_lock_key(queue, k) for k in unique]})
        if len(unique) == 1:
            conn.execute(self._q["key_release"], {"queue": queue, "key": unique[0],
                                                  "channel": self.channel})
        else:
            conn.execute(self._q["keys_release"], {"queue": queue, "keys": unique,
                                                   "channel": self.channel})

    def message_wait(self, queues: Sequence[str], timeout: float) -> None:
        # NOTIFY wakes us for new and released messages; time alone makes delayed ones
        # due and ends leases, so never sleep past the next such moment.
        names = list(queues)
        found = self._call(False, lambda c: self._one(c, "next_due", {"queues": names}))
        due = float("inf") if found[0] is None else max(float(found[0]), 0.01)
        self._listen().wait(tuple(names), min(timeout, self._poll_interval, due))

    # -- finishing ---------------------------------------------------------------------

    def message_ack(self, acks: Sequence[AckParams]) -> list[bool | None]:
        return self._call(
            False, lambda conn: self._ack(conn, acks, in_transaction=False),
            rerun=lambda conn: self._confirm_gone(
                conn, acks, self._ack(conn, acks, in_transaction=False)))

    def _confirm_gone(self, conn: psycopg.Connection[Any], acks: Sequence[AckParams],
                      results: list[bool | None]) -> list[bool | None]:
        """An ack re-run after its connection broke: a receipt whose message is gone was
        acked by the first try (its commit went through before the break), not lost."""
        unsure = [a.message_id for a, r in zip(acks, results, strict=True) if r is None]
        if not unsure:
            return results
        present = {r[0] for r in conn.execute(self._q["messages_present"], {"ids": unsure})}
        return [False if r is None and a.message_id not in present else r
                for a, r in zip(acks, results, strict=True)]

    def _ack(self, conn: psycopg.Connection[Any], acks: Sequence[AckParams],
             in_transaction: bool) -> list[bool | None]:
        outcome: dict[tuple[str, str], bool] = {}  # by receipt: see message_ack_claim
        groups: defaultdict[tuple[str, bool], list[AckParams]] = defaultdict(list)
        for a in acks:
            plain = a.key_known and a.ordering_key is None
            groups[(a.queue, plain)].append(a)
        for (queue, plain), group in groups.items():
            if plain and not in_transaction:
                # No key: one statement, no transaction round trips.
                found = self._ack_rows(conn, queue, group)
            else:
                with conn.transaction():
                    found = self._ack_rows(conn, queue, group, durable=in_transaction)
                    self._release(conn, queue, [r[1] for r in found if r[1] is not None])
            outcome.update({(r[0], r[3]): bool(r[2]) for r in found})
            if found and group[0].wake:
                self._wake(conn, [queue], committed=not in_transaction)
        return [outcome.get((a.message_id, a.token)) for a in acks]

    def _wake(self, conn: psycopg.Connection[Any], queues: Iterable[str], *,
              committed: bool) -> None:
        """Room under max_in_flight: NOTIFY is sent for new messages only, so receivers
        waiting on a capped queue would otherwise wait for their next poll. After a
        committed ack a failure here must not fail (and retry) the ack: the waiters
        still have their poll."""
        for queue in sorted(set(queues)):
            with contextlib.suppress(psycopg.Error) if committed else contextlib.nullcontext():
                conn.execute("SELECT pg_notify(%s, %s)", (self.channel, queue))

    def _ack_rows(self, conn: psycopg.Connection[Any], queue: str,
                  group: list[AckParams], durable: bool = False) -> list[Any]:
        q = self._q_durable if durable else self._q
        if len(group) == 1:
            a = group[0]
            return conn.execute(q["message_ack_one"], {
                "queue": queue, "id": a.message_id, "token": a.token,
                "seq": a.seq}).fetchall()
        return conn.execute(q["message_ack"], {
            "queue": queue, "ids": [a.message_id for a in group],
            "tokens": [a.token for a in group], "seqs": [a.seq for a in group]}).fetchall()

    @contextmanager
    def message_ack_transaction(self, ack: AckParams) -> Iterator[psycopg.Connection[Any]]:
        # The ack goes first: its DELETE locks the row, so nobody else can lease the
        # message until this transaction ends, and a lost lease fails before the effect.
        pool = self._pools()[0]
        try:
            with pool.connection() as conn, conn.transaction():
                if self._ack(conn, [ack], in_transaction=True)[0] is None:
                    raise LeaseLost(f"message {ack.message_id} was received again or is "
                                    "gone; the transaction was rolled back")
                yield conn
        except psycopg.OperationalError as exc:
            raise self._storage_error(exc) from None

    def message_nack(self, params: NackParams) -> bool:
        park = params.on_dead == "park"

        def run(conn: psycopg.Connection[Any]) -> bool:
            with conn.transaction():
                row = conn.execute(self._q["message_nack"], {
                    "id": params.message_id, "queue": params.queue, "token": params.token,
                    "seq": params.seq, "delay": params.delay, "error": params.error or "nacked",
                    "max_attempts": params.max_attempts, "aging": params.aging,
                    "park": park, "dead": params.dead, "spare": params.spare,
                    "channel": self.channel,
                }).fetchone()
                if row is None:
                    return False
                state, key, _ = row
                if state == "dead" and key is not None and not park:
                    self._release(conn, params.queue, [key])
                if params.wake:
                    self._wake(conn, [params.queue], committed=False)
                return True

        return self._call(False, run)

    def message_attempt(self, queue: str, message_id: str, token: str,
                        seq: int | None) -> int | None:
        found = self._all(False, "message_attempt", {"queue": queue, "id": message_id,
                                                     "token": token, "seq": seq})
        return int(found[0][0]) if found else None

    def message_extend(self, extends: Sequence[ExtendParams]) -> list[float | None]:
        def run(conn: psycopg.Connection[Any]) -> list[float | None]:
            # By receipt (id and token): a stale receipt beside the current one of the same
            # message is told it lost its lease, not given the current one's deadline.
            found: dict[tuple[str, str], float] = {}
            for queue in {e.queue for e in extends}:
                group = [e for e in extends if e.queue == queue]
                rows_ = conn.execute(self._q["message_extend"], {
                    "queue": queue, "ids": [e.message_id for e in group],
                    "tokens": [e.token for e in group], "seqs": [e.seq for e in group],
                    "seconds": [e.seconds for e in group],
                    "max_attempts": group[0].max_attempts}).fetchall()
                found.update({(i, t): float(until) for i, t, until in rows_})
            return [found.get((e.message_id, e.token)) for e in extends]

        return self._call(False, run)

    # -- operators ---------------------------------------------------------------------

    def message_peek(self, queue: str, limit: int) -> list[PeekedMessage]:
        found = self._all(False, "message_peek", {"queue": queue, "limit": limit})
        return [rows.peeked(queue, r) for r in found]

    def dead_list(self, params: DeadListParams) -> list[DeadMessage]:
        def run(conn: psycopg.Connection[Any]) -> list[Any]:
            before = None
            if params.older_than is not None:
                before = float(self._one(conn, "clock_now", {})[0]) - params.older_than
            return conn.execute(self._q["dead_list"], {
                "queue": params.queue, "ordering_key": params.ordering_key,
                "dead_before": before, "error": params.error_contains,
                "limit": params.limit}).fetchall()

        return [rows.dead_letter(params.queue, r) for r in self._call(False, run)]

    def dead_redrive(self, params: RedriveParams) -> int:
        args = {"queue": params.queue, "ids": list(params.ids or []),
                "all": params.ids is None, "aging": params.aging}

        def run(conn: psycopg.Connection[Any]) -> int:
            with conn.transaction():
                keys = [r[0] for r in conn.execute(self._q["dead_keys"], args)]
                count = conn.execute(self._q["dead_redrive"], args).rowcount
                self._release(conn, params.queue, keys)
                conn.execute("SELECT pg_notify(%s, %s)", (self.channel, params.queue))
                return int(count)

        return self._call(True, run)

    def message_purge(self, queue: str, dead: bool) -> int:
        def run(conn: psycopg.Connection[Any]) -> int:
            with conn.transaction():
                if dead:
                    gone = conn.execute(self._q["purge_dead"], {"queue": queue}).fetchall()
                    self._release(conn, queue, [k for k, parked in gone
                                                if k is not None and parked])
                    count = len(gone)
                else:
                    count = int(conn.execute(self._q["purge_live"], {"queue": queue}).rowcount)
                conn.execute(self._q["count_purged"], {"queue": queue, "n": count})
                return count

        return self._call(True, run)

    def queue_stats(self, queue: str) -> QueueStats:
        def run(conn: psycopg.Connection[Any]) -> QueueStats:
            row = self._one(conn, "stats", {"queue": queue})
            parked = [r[0] for r in conn.execute(self._q["stats_parked"], {"queue": queue})]
            return rows.stats(queue, row[:-1], float(row[-1]), parked)

        return self._call(False, run)

    # -- topics ------------------------------------------------------------------------

    def topic_save(self, topic: str) -> None:
        self._all_exec("topic_save", {"name": topic})

    def topic_list(self) -> list[str]:
        return [str(r[0]) for r in self._all(False, "topic_list", {})]

    def subscription_save(self, subscription: Subscription) -> None:
        self._all_exec("subscription_save", {
            "topic": subscription.topic, "queue": subscription.queue,
            "filter": None if subscription.filter is None else json.dumps(
                subscription.filter, sort_keys=True)})

    def subscription_list(self, topic: str) -> list[Subscription]:
        return self._call(False, lambda conn: self._subscriptions(conn, topic))

    def _subscriptions(self, conn: psycopg.Connection[Any], topic: str) -> list[Subscription]:
        found = conn.execute(self._q["subscription_list"], {"topic": topic}).fetchall()
        return [Subscription(t, q, None if f is None else json.loads(f)) for t, q, f in found]

    # -- workers -----------------------------------------------------------------------

    def worker_save(self, worker: WorkerInfo) -> None:
        self._call(False, lambda c: c.execute(self._q["worker_save"], {
            "id": worker.id, "host": worker.host, "pid": worker.pid,
            "queues": json.dumps(worker.queues), "concurrency": worker.concurrency,
            "in_flight": worker.in_flight, "started_at": worker.started_at,
            "state": worker.state}))

    def worker_list(self) -> list[WorkerInfo]:
        return [WorkerInfo(i, h, p, json.loads(q), c, f, s, seen, st)
                for i, h, p, q, c, f, s, seen, st in self._all(False, "worker_list", {})]

    def worker_prune(self, before: float) -> int:
        return self._all_exec("worker_prune", {"before": before})

    def close(self) -> None:
        if self._pid != os.getpid():
            return
        self._owned.close()
        self._durable = self._fast = None
        self._listener = None


class _Owned:
    """The pools and listener one backend opened in this process, closed once."""

    def __init__(self, items: list[ConnectionPool | Listener]) -> None:
        self.items = items
        self._pid = os.getpid()

    def close(self) -> None:
        items, self.items = self.items, []
        if not items or self._pid != os.getpid():
            return  # nothing opened, or a forked child's copy of the parent's
        if threading.current_thread().name.startswith("hailq-"):
            # Collected in one of their own threads: it cannot join itself.
            threading.Thread(target=_close_all, args=(items,), daemon=True,
                             name="closing-hailq").start()
        else:
            _close_all(items)


def _close_all(items: list[ConnectionPool | Listener]) -> None:
    for item in reversed(items):  # the listener first, then the pools
        item.close()


_RELAXED = sql.SQL("(SELECT set_config('synchronous_commit', 'off', true)) IS NOT NULL")


def _render(schema: str, relaxed: sql.Composable) -> dict[str, str]:
    parts = {"schema": sql.Identifier(schema), "relaxed": relaxed}
    return {name: sql.SQL(text).format(**parts).as_string(None) for name, text in _RAW.items()}


def _claim_args(params: ClaimParams) -> dict[str, Any]:
    return {"queue": params.queue, "n": params.max_messages, "lease": params.lease}


def _claimed_rows(found: list[Any]) -> list[ClaimedRow]:
    found.sort(key=delivery_order)  # RETURNING has no order: back to rule 16's
    return [ClaimedRow.from_returning(r) for r in found]


def _insert_args(messages: Sequence[NewMessage]) -> dict[str, Any]:
    return {
        "ids": [m.id for m in messages], "queues": [m.queue for m in messages],
        "bodies": [m.body for m in messages], "kinds": [m.body_kind for m in messages],
        "headers": [m.headers for m in messages], "priorities": [m.priority for m in messages],
        "keys": [m.ordering_key for m in messages], "delays": [m.delay for m in messages],
        "agings": [m.aging for m in messages]}


def _lock_key(queue: str, key: str) -> str:
    return f"{queue}\x1f{key}"
