"""The inbox: exactly-once effects in the consumer's own database (SPEC rule 21).

Record the message id in the same transaction as the effect; a redelivered
message finds its id already recorded and skips the effect::

    inbox = hailq.inbox(conn, "billing")
    with conn:                       # the consumer's transaction
        if inbox.record(message.id):  # False: already processed
            conn.execute("INSERT INTO invoices ...")
    message.ack()
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from hailq._time import Duration, seconds
from hailq.codec import check_key
from hailq.errors import InvalidArgument
from hailq.observe import inbox_use
from hailq.settings import check_name

_CREATE = (
    "CREATE TABLE IF NOT EXISTS hailq_inbox ("
    "consumer TEXT NOT NULL, message_id TEXT NOT NULL, processed_at DOUBLE PRECISION NOT NULL, "
    "PRIMARY KEY (consumer, message_id))"
)


class Inbox:
    """Processed message ids of one consumer, in a table ``hailq_inbox`` of its database."""

    def __init__(self, connection: Any, consumer: str) -> None:
        self.consumer = check_name(consumer, "consumer name")
        self._conn = connection
        if isinstance(connection, sqlite3.Connection):
            self._mark = "?"
            connection.execute(_CREATE)
        elif _is_psycopg(connection):
            self._mark = "%s"
            if connection.info.transaction_status == 0:  # idle: create in its own transaction
                with connection.transaction():
                    connection.execute(_CREATE)
            else:
                connection.execute(_CREATE)
        else:
            raise InvalidArgument("inbox needs a sqlite3.Connection or a psycopg Connection, "
                                  f"got {type(connection).__name__}")

    def _sql(self, text: str) -> str:
        return text.replace("?", self._mark)

    def record(self, message_id: str) -> bool:
        """Record ``message_id`` in the current transaction; False if it was already there."""
        check_key(message_id, "message_id")
        inbox_use.note(message_id)
        cur = self._conn.execute(self._sql(
            "INSERT INTO hailq_inbox (consumer, message_id, processed_at) VALUES (?, ?, ?) "
            "ON CONFLICT (consumer, message_id) DO NOTHING"),
            (self.consumer, message_id, time.time()))
        return bool(cur.rowcount == 1)

    def seen(self, message_id: str) -> bool:
        """True if ``message_id`` was recorded (and committed, or recorded in this transaction)."""
        inbox_use.note(message_id)
        cur = self._conn.execute(self._sql(
            "SELECT 1 FROM hailq_inbox WHERE consumer = ? AND message_id = ?"),
            (self.consumer, message_id))
        return cur.fetchone() is not None

    def forget(self, older_than: Duration) -> int:
        """Delete records older than ``older_than``; keep them longer than any redelivery."""
        cutoff = time.time() - seconds(older_than, "older_than")
        cur = self._conn.execute(self._sql(
            "DELETE FROM hailq_inbox WHERE consumer = ? AND processed_at < ?"),
            (self.consumer, cutoff))
        return int(cur.rowcount)


def inbox(connection: Any, consumer: str) -> Inbox:
    """Open the inbox of ``consumer`` on ``connection`` (creating its table if needed)."""
    return Inbox(connection, consumer)


def _is_psycopg(connection: Any) -> bool:
    return type(connection).__module__.startswith("psycopg")
