"""The PostgreSQL backend leaves nothing on a session that a pooler could hand to others.

Through a transaction pooler, a setting made for a session stays on the server
connection that the next client's transaction gets. Leases and acks relax
durability for their own transaction only; the connection every call used
still says ``synchronous_commit = on`` afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

import hailq
from hailq.backends.postgres.backend import PostgresDialect
from hailq.backends.sql import SqlBackend


@pytest.fixture
def pg_broker(pg_url: str) -> Iterator[hailq.Broker]:
    broker = hailq.connect(pg_url)
    yield broker
    broker.close()


def _sessions(backend: SqlBackend) -> list[str]:
    """synchronous_commit of every idle connection in both of the backend's pools."""
    found = []
    assert isinstance(backend.dialect, PostgresDialect)
    for pool in backend.dialect._pools():
        with pool.connection() as conn:
            row = conn.execute("SHOW synchronous_commit").fetchone()
            assert row is not None
            found.append(str(row[0]))
    return found


def test_leases_and_acks_leave_every_connection_durable(pg_broker: hailq.Broker) -> None:
    backend = pg_broker.backend
    assert isinstance(backend, SqlBackend)
    q = pg_broker.queue("sessions")
    q.send_many([{"n": n} for n in range(4)])
    q.send({"n": 9}, ordering_key="k")
    first = q.receive(max_messages=2)
    q.ack_many(first)
    _, more = q.ack_and_receive([], max_messages=2)
    for m in more:
        m.nack(delay=0)
    [m, *_] = q.receive(max_messages=5)
    q.extend_many([m], 30)
    m.ack()
    assert _sessions(backend) == ["on", "on"]


def test_an_effect_committed_with_its_ack_is_durable(pg_broker: hailq.Broker,
                                                     pg_url: str) -> None:
    """The variant that commits a caller's effect with its ack never relaxes the commit."""
    q = pg_broker.queue("effects")
    q.send({"n": 1})
    [m] = q.receive()
    with m.transaction() as conn:
        assert isinstance(conn, psycopg.Connection)
        row = conn.execute("SHOW synchronous_commit").fetchone()
        assert row is not None and row[0] == "on"
