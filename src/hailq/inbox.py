"""The inbox: exactly-once effects in the consumer's own database (SPEC rules 21, 38).

Record the message id in the same transaction as the effect; a redelivered
message finds its id already recorded and skips the effect::

    inbox = hailq.inbox(conn, "billing")
    with conn:                       # the consumer's transaction
        if inbox.record(message.id):  # False: already processed
            conn.execute("INSERT INTO invoices ...")
    message.ack()

The connection may be any the user holds (``hailq/connections.py``): sqlite3,
psycopg 3, psycopg2, asyncpg, SQLAlchemy, Django, PyMySQL or mysqlclient, on SQLite,
PostgreSQL or MySQL/MariaDB. On an asyncio connection ``hailq.inbox`` returns an
``AsyncInbox`` whose calls are awaited. Each call is one step, written once and
driven either way.

The table ``hailq_inbox`` is created when missing. On MySQL/MariaDB a ``CREATE
TABLE`` commits the caller's open transaction, so there it is created only where no
transaction is open; inside one, a missing table raises ``InvalidArgument`` (open
the inbox once at start-up, or run ``Inbox.ddl("mysql")`` yourself).
"""

from __future__ import annotations

import sqlite3
import time
from typing import TYPE_CHECKING, Any, overload

from hailq._time import Duration, seconds
from hailq.codec import check_key
from hailq.connections import Caller, Flavor, Statement, Step, caller, drive, drive_async
from hailq.errors import InvalidArgument
from hailq.observe import inbox_use
from hailq.settings import check_name

if TYPE_CHECKING:
    import psycopg

_DDL: dict[Flavor, str] = {
    "sqlite": "CREATE TABLE IF NOT EXISTS hailq_inbox (consumer TEXT NOT NULL, "
              "message_id TEXT NOT NULL, processed_at DOUBLE PRECISION NOT NULL, "
              "PRIMARY KEY (consumer, message_id))",
    "postgres": "CREATE TABLE IF NOT EXISTS hailq_inbox (consumer TEXT NOT NULL, "
                "message_id TEXT NOT NULL, processed_at DOUBLE PRECISION NOT NULL, "
                "PRIMARY KEY (consumer, message_id))",
    # MariaDB refuses a TEXT primary key: names are at most 128 characters, ids 255.
    "mysql": "CREATE TABLE IF NOT EXISTS hailq_inbox (consumer VARCHAR(128) NOT NULL, "
             "message_id VARCHAR(255) NOT NULL, processed_at DOUBLE NOT NULL, "
             "PRIMARY KEY (consumer, message_id)) CHARACTER SET utf8mb4",
}
_EXISTS: dict[Flavor, str] = {
    "sqlite": "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'hailq_inbox'",
    "postgres": "SELECT 1 WHERE to_regclass('hailq_inbox') IS NOT NULL",
    "mysql": "SELECT 1 FROM information_schema.tables WHERE table_schema = DATABASE() "
             "AND table_name = 'hailq_inbox'",
}
_INSERT: dict[Flavor, str] = {
    "sqlite": "INSERT INTO hailq_inbox (consumer, message_id, processed_at) VALUES (?, ?, ?) "
              "ON CONFLICT (consumer, message_id) DO NOTHING",
    "postgres": "INSERT INTO hailq_inbox (consumer, message_id, processed_at) "
                "VALUES (?, ?, ?) ON CONFLICT (consumer, message_id) DO NOTHING",
    # Values are checked before: IGNORE can only skip the duplicate key.
    "mysql": "INSERT IGNORE INTO hailq_inbox (consumer, message_id, processed_at) "
             "VALUES (?, ?, ?)",
}


class _Steps:
    """The inbox's steps, each a generator of statements (``hailq/connections.py``)."""

    def __init__(self, connection: Any, consumer: str) -> None:
        self.consumer = check_name(consumer, "consumer name")
        self._caller: Caller = caller(connection)
        self._ready = False

    @staticmethod
    def ddl(flavor: Flavor) -> str:
        """The statement that creates ``hailq_inbox`` on ``flavor``'s database."""
        return _DDL[flavor]

    def _table(self) -> Step[None]:
        if self._ready:
            return
        flavor = self._caller.flavor
        found = yield Statement(_EXISTS[flavor], rows=True)
        if not found.rows:
            if flavor == "mysql":
                busy = yield Statement("SELECT @@in_transaction", rows=True)
                if busy.rows and busy.rows[0][0]:
                    raise InvalidArgument(
                        "the inbox table hailq_inbox does not exist, and creating it on "
                        "MySQL/MariaDB would commit the open transaction: open the inbox "
                        "once outside a transaction (at start-up), or create the table "
                        f"with: {_DDL['mysql']}")
            yield Statement(_DDL[flavor])
        self._ready = True

    def _record(self, message_id: str) -> Step[bool]:
        check_key(message_id, "message_id")
        inbox_use.note(message_id)
        yield from self._table()
        done = yield Statement(_INSERT[self._caller.flavor],
                               (self.consumer, message_id, time.time()))
        return done.rowcount == 1

    def _seen(self, message_id: str) -> Step[bool]:
        check_key(message_id, "message_id")
        inbox_use.note(message_id)
        yield from self._table()
        found = yield Statement("SELECT 1 FROM hailq_inbox WHERE consumer = ? AND "
                                "message_id = ?", (self.consumer, message_id), rows=True)
        return bool(found.rows)

    def _forget(self, older_than: Duration) -> Step[int]:
        cutoff = time.time() - seconds(older_than, "older_than")
        yield from self._table()
        done = yield Statement("DELETE FROM hailq_inbox WHERE consumer = ? AND "
                               "processed_at < ?", (self.consumer, cutoff))
        return max(done.rowcount, 0)


class Inbox(_Steps):
    """Processed message ids of one consumer, in a table ``hailq_inbox`` of its database,
    on a blocking connection."""

    def __init__(self, connection: Any, consumer: str) -> None:
        super().__init__(connection, consumer)
        drive(self._caller, self._table())

    def record(self, message_id: str) -> bool:
        """Record ``message_id`` in the current transaction; False if it was already there."""
        return drive(self._caller, self._record(message_id))

    def seen(self, message_id: str) -> bool:
        """True if ``message_id`` was recorded (and committed, or recorded in this transaction)."""
        return drive(self._caller, self._seen(message_id))

    def forget(self, older_than: Duration) -> int:
        """Delete records older than ``older_than``; keep them longer than any redelivery."""
        return drive(self._caller, self._forget(older_than))


class AsyncInbox(_Steps):
    """``Inbox`` on an asyncio connection: the same calls, awaited. Its table is made,
    if missing, at the first call."""

    async def record(self, message_id: str) -> bool:
        """Record ``message_id`` in the current transaction; False if it was already there."""
        return await drive_async(self._caller, self._record(message_id))

    async def seen(self, message_id: str) -> bool:
        """True if ``message_id`` was recorded (and committed, or recorded in this transaction)."""
        return await drive_async(self._caller, self._seen(message_id))

    async def forget(self, older_than: Duration) -> int:
        """Delete records older than ``older_than``; keep them longer than any redelivery."""
        return await drive_async(self._caller, self._forget(older_than))


@overload
def inbox(connection: sqlite3.Connection | psycopg.Connection[Any], consumer: str) -> Inbox: ...
@overload
def inbox(connection: psycopg.AsyncConnection[Any], consumer: str) -> AsyncInbox: ...
@overload
def inbox(connection: Any, consumer: str) -> Any: ...
def inbox(connection: Any, consumer: str) -> Any:
    """Open the inbox of ``consumer`` on ``connection`` (creating its table if needed):
    an ``Inbox``, or an ``AsyncInbox`` on an asyncio connection."""
    if caller(connection).is_async:
        return AsyncInbox(connection, consumer)
    return Inbox(connection, consumer)
