"""Rule 40, history: a queue with ``retain`` keeps its acked, dead and cancelled
messages searchable (attempts, errors, handler time, consumer), pruned after the
retention in bounded batches; a queue without it keeps nothing and runs no statement
more (on PostgreSQL its acks' INSERT into history finds no row)."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from typing import Any

import pytest

import hailq
from hailq.backends.base_parts import HistoryPruneParams
from hailq.errors import InvalidArgument
from hailq.history import HistoryQuery

from .helpers import RawDatabase, advance


def history_rows(raw: RawDatabase) -> int:
    if raw.is_sqlite:  # with the rows acks wrote that upkeep has not moved in yet
        return raw.count("hailq_history") + raw.count("hailq_history_fresh")
    return raw.count(raw.table("history"))


class Statements:
    """Every statement the broker's database runs, as text (SQLite: its trace callback,
    which also names each trigger program entered; PostgreSQL: what psycopg sends)."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.lock = threading.Lock()

    def add(self, text: str) -> None:
        with self.lock:
            self.seen.append(str(text))


@pytest.fixture
def statements(broker: hailq.Broker, backend_name: str,
               monkeypatch: pytest.MonkeyPatch) -> Iterator[Statements]:
    found = Statements()
    if backend_name == "sqlite":
        broker.backend.dialect._connection().set_trace_callback(found.add)  # type: ignore[attr-defined]
    else:
        import psycopg

        real = psycopg.Connection.execute

        def spy(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
            found.add(query if isinstance(query, str) else repr(query))
            return real(self, query, *args, **kwargs)

        monkeypatch.setattr(psycopg.Connection, "execute", spy)
    yield found
    if backend_name == "sqlite":
        broker.backend.dialect._connection().set_trace_callback(None)  # type: ignore[attr-defined]


def cycle(q: hailq.Queue) -> None:
    """Send, receive, ack (one and a batch), fail once and kill one."""
    q.send_many(["a", "b", "c", "d"])
    got = q.receive(4)
    got[0].ack()
    q.ack_many(got[1:3])
    got[3].dead_letter("poison")


def test_rule_40_without_retain_no_history_rows_and_no_statement_about_it(
        broker: hailq.Broker, raw: RawDatabase, statements: Statements) -> None:
    q = broker.queue("plain")
    statements.seen.clear()  # the cycle's statements only
    cycle(q)
    text = "\n".join(statements.seen).lower()
    assert history_rows(raw) == 0
    assert statements.seen  # the spy saw the cycle's statements
    # Neither a mark at claim nor a history statement of its own; SQLite enters the
    # trigger's program to read its WHEN, and on PostgreSQL each ack statement carries
    # its history INSERT (over the deleted rows its claim marked: none here).
    assert "consumer = " not in text and ", retain = " not in text
    for one in statements.seen:
        one = one.lower()
        if re.search(r"(insert into|update|delete from) \S*history", one):
            assert "kept as (" in one and re.search(r"delete from \S*messages", one)
            assert re.search(r"from gone where h_kept", one)
    assert broker.history() == []


def test_rule_40_acked_and_dead_are_recorded_with_attempts_errors_time_and_consumer(
        broker: hailq.Broker) -> None:
    q = broker.queue("claims", retain="24h", max_attempts=2)
    first = q.send({"n": 1}, headers={"claim": "4711"}, dedup_id="c-4711",
                   ordering_key="cust-1")
    second = q.send("dies")
    q.consumer = "worker test:1"
    got = {m.id: m for m in q.receive(2)}
    got[first].nack(delay=0, error="timeout talking to the bank")
    got[second].nack(delay=0, error="bad input")
    again = {m.id: m for m in q.receive(2)}
    again[first].ack()
    again[second].nack(delay=0, error="bad input again")  # its last attempt: dead

    acked = q.finished(first)
    assert acked is not None and acked.outcome == "acked"
    assert acked.body == {"n": 1} and acked.headers == {"claim": "4711"}
    assert acked.dedup_id == "c-4711" and acked.ordering_key == "cust-1"
    assert [(a.attempt, a.error, a.consumer) for a in acked.attempts] == [
        (1, "timeout talking to the bank", "worker test:1"), (2, None, "worker test:1")]
    assert all(a.handler_time is not None and a.handler_time >= 0 for a in acked.attempts)
    assert acked.consumer == "worker test:1" and acked.handler_time is not None

    dead = q.finished(second)
    assert dead is not None and dead.outcome == "dead" and dead.body == "dies"
    assert [(a.attempt, a.error) for a in dead.attempts] == [
        (1, "bad input"), (2, "bad input again")]
    assert dead.attempts[-1].consumer == "worker test:1"
    # A dead letter stays one: history has it once, however it is later purged.
    q.purge(dead=True)
    assert [e.outcome for e in q.history()] == ["dead", "acked"] or \
        sorted(e.outcome for e in q.history()) == ["acked", "dead"]
    assert len(q.history()) == 2


def test_rule_40_a_lease_that_ends_on_the_last_attempt_is_recorded_dead(
        broker: hailq.Broker) -> None:
    q = broker.queue("slow", retain=3600, max_attempts=1, lease=1)
    sent = q.send("x")
    assert q.receive(1)
    advance(broker, 1.5)
    q.maintain()
    found = q.finished(sent)
    assert found is not None and found.outcome == "dead"
    assert found.attempts[-1].error == "lease expired"
    assert found.attempts[-1].consumer == "library"


def test_rule_40_searches_by_each_filter(broker: hailq.Broker) -> None:
    q = broker.queue("orders", retain="1d")
    other = broker.queue("refunds", retain="1d")
    ids = [q.send(f"o{i}", headers={"order": f"47{i}"}, dedup_id=f"d{i}",
                  ordering_key=f"k{i % 2}") for i in range(4)]
    refund = other.send("r", headers={"order": "471"})
    for _ in range(2):  # a key's second message comes once its first is acked
        q.ack_many(q.receive(4))
    other.receive(1)[0].dead_letter("no")
    assert [e.id for e in broker.history(id=ids[2])] == [ids[2]]
    assert [e.id for e in broker.history(dedup_id="d3")] == [ids[3]]
    assert {e.id for e in broker.history(header=("order", "471"))} == {ids[1], refund}
    assert {e.id for e in broker.history(ordering_key="k0")} == {ids[0], ids[2]}
    assert {e.id for e in broker.history(queue="refunds")} == {refund}
    assert [e.id for e in broker.history(outcome="dead")] == [refund]
    assert len(q.history()) == 4 and len(broker.history(limit=2)) == 2
    everything = broker.history()
    newest = max(e.finished_at for e in everything)
    assert broker.history(since=newest + 1) == []
    assert len(broker.history(until=newest + 1)) == 5
    assert broker.history(queue="orders", header=("order", "471"), outcome="acked")[0].id \
        == ids[1]
    with pytest.raises(InvalidArgument):
        broker.history(outcome="gone")
    with pytest.raises(InvalidArgument):
        HistoryQuery(limit=0)


def test_rule_40_bodies_are_left_out_when_the_queue_says_so(broker: hailq.Broker) -> None:
    q = broker.queue("private", retain="1h", retain_bodies=False)
    sent = q.send({"card": "4111"}, headers={"ref": "r1"})
    q.receive(1)[0].ack()
    found = q.finished(sent)
    assert found is not None and found.body is None and found.headers == {"ref": "r1"}


def test_rule_40_an_operator_turns_retention_on_and_off_live(broker: hailq.Broker) -> None:
    declared = broker.queue("live")
    consumer = broker.get_queue("live")
    before = declared.send("before")
    consumer.receive(1)[0].ack()
    broker.configure("live", retain="2h")  # hailq configure live --retain 2h
    during = declared.send("during")
    advance(broker, 0.6)  # past a process's settings cache (core.SETTINGS_FOR)
    consumer.receive(1)[0].ack()
    broker.configure("live", retain=None)
    after = declared.send("after")
    advance(broker, 0.6)
    consumer.receive(1)[0].ack()
    assert [e.id for e in broker.history(queue="live")] == [during]
    assert declared.finished(before) is None and declared.finished(after) is None


def test_rule_40_purged_and_deleted_messages_are_not_taken_for_acks(broker: hailq.Broker) -> None:
    q = broker.queue("tidy", retain="1h")
    q.send_many(["a", "b"])
    for m in q.receive(2):
        m.nack(delay=0, error="later")  # claimed while retaining, then back in line
    gone = q.send("c")
    q.receive(3)
    assert q.delete_message(gone)
    assert q.purge() == 2
    assert broker.history() == []


def test_rule_40_prune_after_the_retention_in_bounded_batches(broker: hailq.Broker,
                                                      raw: RawDatabase) -> None:
    q = broker.queue("short", retain=60)
    q.send_many([str(i) for i in range(12)])
    q.ack_many(q.receive(12))
    keep = HistoryPruneParams("short", keep=60, batch=5)
    assert broker.backend.history_prune(keep) == 0  # nothing is older than a minute
    table = raw.table("hailq_history" if raw.is_sqlite else "history")
    if raw.is_sqlite:
        advance(broker, 61)
    else:  # the database's clock rules: the rows' finish is moved back instead
        raw.execute(f"UPDATE {table} SET finished_at = finished_at - 61")
    assert [broker.backend.history_prune(keep) for _ in range(4)] == [5, 5, 2, 0]
    assert history_rows(raw) == 0


def test_rule_40_history_is_found_before_and_after_upkeep_moves_it_in(
        broker: hailq.Broker, raw: RawDatabase) -> None:
    """SQLite's acks write history unindexed (migration 19) and upkeep moves it in a
    batch at a time: a search finds every message once, newest first, on either side
    of the move and across both tables at once."""
    from hailq.backends.base_parts import SETTLE_BATCH, HistorySettleParams

    q = broker.queue("moved", retain="1h")
    total = SETTLE_BATCH + 30
    ids = q.send_many([{"n": i} for i in range(total)])
    for _ in range(0, total, 100):
        q.ack_many(q.receive(100))
    assert q.receive() == []  # claim-time upkeep: on SQLite, one batch moves in

    def searched() -> list[str]:
        return [e.id for e in broker.history(queue="moved", limit=total + 10)]

    def stored() -> tuple[int, int]:
        if not raw.is_sqlite:
            return raw.count(raw.table("history")), 0
        return raw.count("hailq_history"), raw.count("hailq_history_fresh")

    if raw.is_sqlite:
        assert stored() == (SETTLE_BATCH, 30)  # split across both tables
    found = searched()
    assert sorted(found) == sorted(ids) and len(set(found)) == total
    finished = [e.finished_at for e in broker.history(queue="moved", limit=total)]
    assert finished == sorted(finished, reverse=True)
    assert [e.id for e in broker.history(id=ids[-1])] == [ids[-1]]  # one still fresh
    assert [e.id for e in broker.history(id=ids[0])] == [ids[0]]  # one moved in
    moved = broker.backend.history_settle(HistorySettleParams())
    assert moved == (30 if raw.is_sqlite else 0)
    assert stored() == (total, 0)
    assert sorted(searched()) == sorted(ids)


def test_rule_40_retain_setting_is_checked(broker: hailq.Broker) -> None:
    with pytest.raises(InvalidArgument, match="retain"):
        broker.queue("bad", retain="forever")
    with pytest.raises(InvalidArgument, match="retain"):
        broker.queue("bad", retain=0)
    with pytest.raises(InvalidArgument, match="retain_bodies"):
        broker.queue("bad", retain_bodies="no")
    assert broker.queue("good", retain="7d").settings.retain == 7 * 86400
