"""A send's rows on SQLite (``SQLiteDialect.insert``): each queue's row read once, the
counts, then the messages, many rows to a statement where none has an ordering key."""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from hailq.backends.base import NewMessage
from hailq.backends.sqlite.connection import send_key, targets

ROWS_AT_MOST = 64  # rows per message_insert_rows: 704 parameters (old SQLite took 999)
Order = dict[str, tuple[float | None, tuple[float, ...] | None]]


def insert(conn: sqlite3.Connection, messages: Sequence[NewMessage], now: float,
           queries: Mapping[str, str], for_rows: Callable[[str, int], str]) -> int:
    """Insert ``messages`` (dedup settled) and count them as sent; how many rows were
    inserted: none for a queue without a row or a body over its limit."""
    # Each queue looked up once, not once a row: in the unit of work's write
    # transaction no other writer can change or delete it before the inserts. Its
    # row gives the aging and targets the sort keys follow (rule 39), all queues
    # first, so that one without a row leaves the others' counts as they were. A
    # queue without a row: the caller says which.
    counts = Counter(m.queue for m in messages)
    order: Order = {}
    for queue in counts:
        found = conn.execute(queries["queue_order"], {"queue": queue}).fetchone()
        if found is None or max(len(m.body) for m in messages
                                if m.queue == queue) > found[2]:
            return 0  # no queue, or a body over its limit: the caller says which
        order[queue] = (found[0], targets(found[1]))
    for queue, n in counts.items():
        conn.execute(queries["count_sent"], {"queue": queue, "n": n})
    conn.executemany(queries["count_sent_priority"], [  # rule 41's arrival rates
        {"queue": q, "priority": p, "n": n, "now": now}
        for (q, p), n in Counter((m.queue, m.priority) for m in messages).items()])
    if not any(m.ordering_key is not None for m in messages):
        return _insert_rows(conn, messages, now, order, for_rows)
    return int(conn.executemany(queries["message_insert"], [{
        "id": m.id, "queue": m.queue, "body": m.body, "body_kind": m.body_kind,
        "headers": m.headers, "priority": m.priority, "ordering_key": m.ordering_key,
        "sort_key": send_key(m, now, *order[m.queue]),
        "now": now, "delay": m.delay, "dedup_id": m.dedup_id} for m in messages]).rowcount)


def _insert_rows(conn: sqlite3.Connection, messages: Sequence[NewMessage], now: float,
                 order: Order, for_rows: Callable[[str, int], str]) -> int:
    """Messages without an ordering key, in their order, in statements of as many rows
    as a power of two, ``ROWS_AT_MOST`` at most (few sizes of statement, which SQLite's
    statement cache keeps): a shared commit's group, or a batch, in a few statements."""
    inserted, at, left = 0, 0, len(messages)
    while left:
        n = min(1 << (left.bit_length() - 1), ROWS_AT_MOST)
        values: list[Any] = []
        for m in messages[at:at + n]:
            delay = m.delay
            values += (m.id, m.queue, "scheduled" if delay > 0 else "ready", m.body,
                       m.body_kind, m.headers, m.priority, send_key(m, now, *order[m.queue]),
                       now, now + delay, m.dedup_id)
        inserted += conn.execute(for_rows("message_insert_rows", n), values).rowcount
        at, left = at + n, left - n
    return inserted
