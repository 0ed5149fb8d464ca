"""Sends that join the caller's own transaction (SPEC rules 3 and 38).

``connection=`` of ``Queue.send``, ``Queue.send_many`` and ``Topic.publish`` may be
any connection ``hailq/connections.py`` accepts that reaches the broker's database
(SQLite or PostgreSQL). The choreography is written once below, as steps yielding
statements: it checks that the connection reaches hailq's own database (the
instance id of migration 13/11, read through the caller's connection and compared
with the broker's: exact, whatever the host names or files say), claims dedup ids,
inserts and counts. ``send_joined`` drives it on a blocking connection,
``send_joined_async`` awaits it on an asyncio one. Nothing commits here: the
message exists if and only if the caller's transaction commits.

The statements are the dialect's own (``queries.sql``), made positional once per
statement and rendered once per parameter style (``connections.render``).
"""

from __future__ import annotations

import functools
import json
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hailq.backends.base import NewMessage
from hailq.backends.operators import _no_queue
from hailq.backends.sqlite.connection import send_key, targets
from hailq.connections import Caller, Flavor, Statement, Step, caller, drive, drive_async
from hailq.errors import InvalidArgument, MessageTooLarge, TopicNotFound
from hailq.models import Subscription

BuildCopies = Callable[[list[Subscription]], list[NewMessage]]
_NAMED: dict[str, re.Pattern[str]] = {"postgres": re.compile(r"%\((\w+)\)s"),
                                      "sqlite": re.compile(r"(?<![:\w]):([a-z_]+)")}
_NAMES = {"sqlite": "SQLite", "postgres": "PostgreSQL", "mysql": "MySQL/MariaDB"}


@dataclass(frozen=True)
class Place:
    """What a caller's connection needs to join the broker's database."""

    flavor: Flavor
    queries: Mapping[str, str]  # the dialect's named statements, in its own marks
    now: Callable[[], float | None]  # the clock SQLite's statements take; None: the server's
    instance: Callable[[], str]  # the broker's own instance id
    display: str  # the broker's database, for messages


@functools.lru_cache(maxsize=64)
def positional(sql: str, flavor: str) -> tuple[str, tuple[str, ...]]:
    """A named statement with ``?`` marks, and the names in their order."""
    names: list[str] = []

    def mark(found: re.Match[str]) -> str:
        names.append(found.group(1))
        return "?"

    text = _NAMED[flavor].sub(mark, sql)
    return (text.replace("%%", "%") if flavor == "postgres" else text), tuple(names)


def _q(place: Place, name: str, args: Mapping[str, Any], rows: bool = False) -> Statement:
    sql, names = positional(place.queries[name], place.flavor)
    return Statement(sql, tuple(args[n] for n in names), rows)


# -- the steps -------------------------------------------------------------------------------

def _reach(place: Place, c: Caller) -> Step[None]:
    """Refuse a connection that does not reach the broker's own database."""
    if c.flavor != place.flavor:
        raise InvalidArgument(
            f"connection= reaches a {_NAMES[c.flavor]} database; the broker's is "
            f"{_NAMES[place.flavor]} ({place.display}): nothing was sent")
    found = yield _q(place, "instance_found", {}, rows=True)
    ids = (yield _q(place, "instance_id", {}, rows=True)).rows if found.rows[0][0] else []
    if not ids or str(ids[0][0]) != place.instance():
        found_there = "no hailq schema" if not ids else "another hailq instance"
        raise InvalidArgument(
            f"connection= reaches another database than the broker's ({place.display}): "
            f"hailq's instance id read through it names {found_there}; nothing was sent")


def send_step(place: Place, c: Caller, messages: Sequence[NewMessage],
              reached: bool = False) -> Step[list[str]]:
    """Claim dedup ids and insert the rest, in the caller's transaction (rules 3, 4)."""
    if not reached:
        yield from _reach(place, c)
    now = place.now()
    ids: list[str] = []
    fresh: list[NewMessage] = []
    for m in messages:
        if m.dedup_id is not None:
            got = yield _q(place, "dedup_claim", {
                "queue": m.queue, "dedup_id": m.dedup_id, "id": m.id, "now": now},
                rows=True)
            owner = str(got.rows[0][0])
            if owner != m.id:
                ids.append(owner)
                continue
        fresh.append(m)
        ids.append(m.id)
    if fresh:
        insert = _insert_postgres if place.flavor == "postgres" else _insert_sqlite
        if (yield from insert(place, fresh, now)) < len(fresh):
            yield from _refused(place, fresh)
    return ids


def _refused(place: Place, fresh: list[NewMessage]) -> Step[None]:
    """Why the insert stored nothing: a queue without a row, or a body over its queue's
    max_message_size as stored now (rule 39)."""
    for queue in sorted({m.queue for m in fresh}):
        live = yield _q(place, "queue_live", {"queue": queue}, rows=True)
        if not live.rows:
            raise _no_queue(queue)
        limit, large = int(live.rows[0][5]), max(len(m.body) for m in fresh
                                                  if m.queue == queue)
        if large > limit:
            raise MessageTooLarge(f"body is {large} bytes encoded; queue {queue!r} allows "
                                  f"at most {limit} (setting max_message_size)")


def _insert_postgres(place: Place, fresh: list[NewMessage], now: float | None) -> Step[int]:
    from hailq.backends.postgres.backend import insert_args

    keys = sorted({f"{m.queue}\x1f{m.ordering_key}" for m in fresh
                   if m.ordering_key is not None})
    if keys:  # sends and releases of one key take turns (rule 17)
        yield _q(place, "keys_lock", {"keys": keys}, rows=True)
    if len(fresh) == 1 and fresh[0].ordering_key is None:
        m = fresh[0]
        done = yield _q(place, "message_insert_one", {
            "id": m.id, "queue": m.queue, "body": m.body, "kind": m.body_kind,
            "headers": m.headers, "priority": m.priority, "delay": m.delay,
            "dedup_id": m.dedup_id}, rows=True)
    else:
        done = yield _q(place, "message_insert", insert_args(fresh), rows=True)
    return int(done.rows[0][0])


def _insert_sqlite(place: Place, fresh: list[NewMessage], now: float | None) -> Step[int]:
    at = float(now or 0.0)
    counts = Counter(m.queue for m in fresh)
    order = {}  # each queue found before any is counted; its row gives the sort keys
    for queue in counts:
        found = (yield _q(place, "queue_order", {"queue": queue}, rows=True)).rows
        if not found or max(len(m.body) for m in fresh if m.queue == queue) > found[0][2]:
            return 0  # no queue, or a body over its limit: the caller says which
        order[queue] = (found[0][0], targets(found[0][1]))
    for queue, n in counts.items():
        yield _q(place, "count_sent", {"queue": queue, "n": n})
    for (queue, priority), n in Counter((m.queue, m.priority) for m in fresh).items():
        yield _q(place, "count_sent_priority",  # rule 41's arrival rates
                 {"queue": queue, "priority": priority, "n": n, "now": at})
    for m in fresh:
        yield _q(place, "message_insert", {
            "id": m.id, "queue": m.queue, "body": m.body, "body_kind": m.body_kind,
            "headers": m.headers, "priority": m.priority, "ordering_key": m.ordering_key,
            "sort_key": send_key(m, at, *order[m.queue]),
            "now": at, "delay": m.delay, "dedup_id": m.dedup_id})
    return len(fresh)


def publish_step(place: Place, c: Caller, topic: str, build: BuildCopies) -> Step[list[str]]:
    """Copy into every subscription read in the caller's transaction (rule 19)."""
    yield from _reach(place, c)
    found = yield _q(place, "subscription_list", {"topic": topic}, rows=True)
    subscriptions = [Subscription(t, q, None if f is None else json.loads(f))
                     for t, q, f in found.rows]
    if not subscriptions and not (yield _q(place, "topic_get", {"name": topic},
                                           rows=True)).rows:
        raise TopicNotFound(f"no topic named {topic!r} (deleted?); declare it with "
                            "broker.topic()")
    copies = build(subscriptions)
    return (yield from send_step(place, c, copies, reached=True)) if copies else []


# -- driven ----------------------------------------------------------------------------------

def send_joined(place: Place, connection: Any, messages: Sequence[NewMessage]) -> list[str]:
    """Send ``messages`` in the open transaction of a blocking ``connection``."""
    c = joining(connection)
    return drive(c, send_step(place, c, messages))


async def send_joined_async(place: Place, connection: Any,
                            messages: Sequence[NewMessage]) -> list[str]:
    """Send ``messages`` in the open transaction of an asyncio ``connection``."""
    c = joining(connection)
    return await drive_async(c, send_step(place, c, messages))


def publish_joined(place: Place, connection: Any, topic: str, build: BuildCopies) -> list[str]:
    """Publish in the open transaction of a blocking ``connection``."""
    c = joining(connection)
    return drive(c, publish_step(place, c, topic, build))


async def publish_joined_async(place: Place, connection: Any, topic: str,
                               build: BuildCopies) -> list[str]:
    """Publish in the open transaction of an asyncio ``connection``."""
    c = joining(connection)
    return await drive_async(c, publish_step(place, c, topic, build))


def is_async(connection: Any) -> bool:
    """Whether ``connection`` is asyncio's (its sends are awaited); InvalidArgument for a
    connection hailq does not accept."""
    return caller(connection).is_async


def joining(connection: Any) -> Caller:
    """The caller's connection, refused where its statements would commit one by one:
    the message would then be sent whatever became of the caller's work (rule 3)."""
    c = caller(connection)
    if _autocommits(c):
        raise InvalidArgument(
            "connection= is in autocommit mode with no open transaction: begin one "
            "(e.g. `with connection.transaction():`, BEGIN, or session.begin()) so the "
            "message commits with your work; nothing was sent")
    return c


def _autocommits(c: Caller) -> bool:
    conn = c.target
    top = type(conn).__module__.split(".", 1)[0]
    if c.how == "execute":  # sqlite3: autocommit (3.12) or isolation_level None
        mode = getattr(conn, "autocommit", -1)
        return not conn.in_transaction and (mode is True or (
            mode == -1 and conn.isolation_level is None))
    if top == "psycopg":
        return bool(conn.autocommit) and conn.info.transaction_status == 0  # IDLE
    if top == "psycopg2":
        return bool(conn.autocommit) and conn.get_transaction_status() == 0
    if top == "asyncpg":
        return not conn.is_in_transaction()
    if top == "sqlalchemy":
        bind = conn.get_bind() if c.how == "session" else conn
        bind = getattr(bind, "sync_connection", None) or getattr(bind, "sync_engine", bind)
        options = bind.get_execution_options()
        return bool(options.get("isolation_level") == "AUTOCOMMIT")
    return False  # Django: inside atomic(), checked by caller()
