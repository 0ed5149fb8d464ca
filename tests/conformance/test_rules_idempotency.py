"""SPEC rules 21-22: the inbox, and effects that commit together with the ack."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import hailq
from hailq import LeaseLost
from waiting import wait_past

from .helpers import RawDatabase, advance, transaction


@pytest.fixture
def consumer_db(backend_name: str, raw: RawDatabase, tmp_path: Path) -> Iterator[Any]:
    """The consumer's own database: a sqlite3 file, or a psycopg connection on PostgreSQL."""
    if backend_name == "sqlite":
        conn: Any = sqlite3.connect(tmp_path / "billing.db")
    else:
        conn = raw.connect()
        conn.autocommit = True  # so that transaction() below opens real transactions
    with transaction(conn):
        conn.execute("CREATE TABLE invoices (message_id TEXT PRIMARY KEY, amount INTEGER)")
    yield conn
    conn.close()


def mark(conn: Any) -> str:
    return "?" if isinstance(conn, sqlite3.Connection) else "%s"


def invoice_count(conn: Any) -> int:
    return int(conn.execute("SELECT count(*) FROM invoices").fetchone()[0])


# -- rule 21: the inbox ----------------------------------------------------------------------------


def test_rule_21_inbox_skips_the_second_processing_of_a_message(broker: hailq.Broker,
                                                                  consumer_db: Any) -> None:
    q = broker.queue("billing", lease=0.2)
    sent = q.send({"amount": 120})
    inbox = hailq.inbox(consumer_db, "billing")
    p = mark(consumer_db)
    effects = 0

    def process(m: hailq.Message) -> None:
        nonlocal effects
        with transaction(consumer_db):
            if inbox.record(m.id):
                effects += 1
                consumer_db.execute(f"INSERT INTO invoices VALUES ({p}, {p})",
                                    (m.id, m.body["amount"]))

    (first,) = q.receive()
    process(first)  # ... and the consumer crashes before it acks
    advance(broker, 0.3)
    (again,) = q.receive()
    assert (again.id, again.attempt) == (sent, 2)
    process(again)
    again.ack()

    assert effects == 1
    assert invoice_count(consumer_db) == 1
    assert inbox.seen(sent)


def test_rule_21_a_rolled_back_effect_is_not_recorded(broker: hailq.Broker,
                                                      consumer_db: Any) -> None:
    q = broker.queue("billing")
    q.send({"amount": 120})
    inbox = hailq.inbox(consumer_db, "billing")
    p = mark(consumer_db)
    (m,) = q.receive()

    with pytest.raises(RuntimeError), transaction(consumer_db):
        assert inbox.record(m.id)
        consumer_db.execute(f"INSERT INTO invoices VALUES ({p}, {p})", (m.id, 120))
        raise RuntimeError("printer on fire")

    assert not inbox.seen(m.id)
    assert invoice_count(consumer_db) == 0
    with transaction(consumer_db):
        assert inbox.record(m.id)
    assert inbox.seen(m.id)


def test_rule_21_each_consumer_has_its_own_inbox(broker: hailq.Broker, consumer_db: Any) -> None:
    q = broker.queue("billing")
    sent = q.send("event")
    billing = hailq.inbox(consumer_db, "billing")
    shipping = hailq.inbox(consumer_db, "shipping")

    with transaction(consumer_db):
        assert billing.record(sent)
        assert not billing.record(sent)
    with transaction(consumer_db):
        assert shipping.record(sent)

    assert billing.seen(sent) and shipping.seen(sent)
    assert not billing.seen(q.send("another"))


# -- rule 22: effect and ack in one transaction ------------------------------------------


@pytest.fixture
def effects(raw: RawDatabase) -> str:
    """A table of the consumer's effects in the broker's own database."""
    return raw.create_table("effects", "message_id TEXT PRIMARY KEY, amount INTEGER")


def record_effect(raw: RawDatabase, conn: Any, table: str, m: hailq.Message) -> None:
    conn.execute(raw.sql(f"INSERT INTO {table} VALUES (?, ?)"), (m.id, m.body["amount"]))


def test_rule_22_effect_commits_together_with_the_ack(broker: hailq.Broker, raw: RawDatabase,
                                                      effects: str) -> None:
    q = broker.queue("billing", lease=0.3)
    q.send({"amount": 99})
    (m,) = q.receive()

    with m.transaction() as conn:
        record_effect(raw, conn, effects, m)

    assert raw.count(effects) == 1
    advance(broker, 0.35)
    assert q.receive() == []
    stats = q.stats()
    assert (stats.acked, stats.in_flight) == (1, 0)


def test_rule_22_an_error_in_the_block_rolls_back_effect_and_ack(
        broker: hailq.Broker, raw: RawDatabase, effects: str) -> None:
    q = broker.queue("billing")
    q.send({"amount": 99})
    (m,) = q.receive()

    with pytest.raises(ZeroDivisionError), m.transaction() as conn:
        record_effect(raw, conn, effects, m)
        _ = 1 / 0

    assert raw.count(effects) == 0
    stats = q.stats()
    assert (stats.acked, stats.in_flight) == (0, 1)
    m.ack()  # the lease was never given up
    assert q.stats().acked == 1


def test_rule_22_a_consumer_whose_lease_was_lost_cannot_commit_its_effect(
        broker: hailq.Broker, url: str, raw: RawDatabase, effects: str) -> None:
    q = broker.queue("billing", lease=0.2)
    q.send({"amount": 99})
    (stale,) = q.receive()
    wait_past(broker.now, stale.lease_until)  # another connection looks next
    with hailq.connect(url) as elsewhere:
        (current,) = elsewhere.get_queue("billing").receive(lease=30)

        with pytest.raises(LeaseLost), stale.transaction() as conn:
            record_effect(raw, conn, effects, stale)

        assert raw.count(effects) == 0
        assert q.stats().acked == 0
        with current.transaction() as conn:
            record_effect(raw, conn, effects, current)

    assert raw.execute(f"SELECT message_id FROM {effects}") == [(stale.id,)]
    assert q.stats().acked == 1


def test_rule_22_a_late_transaction_commits_if_nobody_received_the_message_since(
        broker: hailq.Broker, raw: RawDatabase, effects: str) -> None:
    q = broker.queue("billing", lease=0.2)
    q.send({"amount": 99})
    (m,) = q.receive()
    advance(broker, 0.3)

    with m.transaction() as conn:
        record_effect(raw, conn, effects, m)

    assert raw.count(effects) == 1
    assert (q.stats().acked, q.stats().late_acks) == (1, 1)


def test_rule_22_nobody_receives_the_message_while_its_transaction_is_open(
        broker: hailq.Broker, url: str, raw: RawDatabase, effects: str) -> None:
    q = broker.queue("billing", lease=0.2)
    q.send({"amount": 99})
    (m,) = q.receive()
    wait_past(broker.now, m.lease_until)  # ended, but nobody received it again
    seen_by_other: list[list[hailq.Message]] = []

    def other_consumer() -> None:
        with hailq.connect(url) as elsewhere:
            seen_by_other.append(elsewhere.get_queue("billing").receive(lease=30))

    with m.transaction() as conn:
        rival = threading.Thread(target=other_consumer)
        rival.start()
        time.sleep(0.3)  # about time: the rival must be blocked while the transaction is open
        record_effect(raw, conn, effects, m)
    rival.join(60)

    assert seen_by_other == [[]]
    assert raw.count(effects) == 1
    assert q.stats().acked == 1
