"""SPEC rule 27: every invalid argument raises a HailqError that says what is allowed,
and nothing is written."""

from __future__ import annotations

import math
import os
import pickle
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

import hailq
from hailq import Envelope, HailqError, InvalidArgument, LeaseLost, MessageTooLarge

from .helpers import RawDatabase

SQL_INJECTION = "a'; DROP TABLE x; --"
BAD_NAMES = ["", "x" * 129, "-starts-with-dash", "_underscore", "with space", "a/b", "ü-umlaut",
             "tab\tname", "nul\x00name", SQL_INJECTION, 'quote"name', None, 42, b"bytes"]


def snapshot(broker: hailq.Broker) -> tuple[Any, ...]:
    """What a bad call must leave untouched: queues, settings, topics and live messages."""
    queues = [(q.name, q.settings) for q in broker.queues()]
    stats = [(s.sent, s.ready, s.scheduled, s.in_flight, s.dead, s.acked, s.nacked)
             for s in (q.stats() for q in broker.queues())]
    peeks = [[(p.id, p.state, p.attempt) for p in q.peek(100)] for q in broker.queues()]
    subs = [sorted(s.queue for s in t.subscriptions()) for t in broker.topics()]
    return queues, stats, peeks, [t.name for t in broker.topics()], subs


def rejected(broker: hailq.Broker, call: Callable[[], object],
             error: type[HailqError] = InvalidArgument, *hints: str) -> str:
    """Run ``call``; it must raise ``error`` naming ``hints`` and change nothing."""
    before = snapshot(broker)
    with pytest.raises(error) as caught:
        call()
    assert isinstance(caught.value, HailqError)
    text = str(caught.value)
    for hint in hints:
        assert hint.lower() in text.lower(), f"{hint!r} missing from {text!r}"
    assert snapshot(broker) == before
    return text


# -- names ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", BAD_NAMES, ids=repr)
def test_rule_27_bad_queue_names_are_rejected(broker: hailq.Broker, name: Any) -> None:
    broker.queue("existing").send("keep me")
    orders = broker.topic("orders")

    text = rejected(broker, lambda: broker.queue(name), InvalidArgument, "128")
    rejected(broker, lambda: broker.get_queue(name))
    rejected(broker, lambda: broker.topic(name))
    rejected(broker, lambda: orders.subscribe(name))

    assert "A-Z" in text or "letter" in text


def test_rule_27_sql_metacharacters_in_names_change_nothing(broker: hailq.Broker,
                                                            raw: RawDatabase) -> None:
    q = broker.queue("claims")
    q.send("keep me")

    rejected(broker, lambda: broker.queue(SQL_INJECTION))
    rejected(broker, lambda: broker.queue("x'); DELETE FROM hailq_messages; --"))

    assert [m.body for m in q.receive()] == ["keep me"]


def test_rule_27_sql_metacharacters_in_values_are_plain_data(broker: hailq.Broker) -> None:
    q = broker.queue("claims")
    nasty = "'; DROP TABLE hailq_messages; -- \" \\ %s ? $1"

    q.send(nasty, ordering_key=nasty, headers={nasty: nasty}, dedup_id=nasty)
    (m,) = q.receive()
    m.dead_letter(nasty)

    (dead,) = q.dead_letters(ordering_key=nasty)
    assert (dead.body, dead.ordering_key, dead.headers) == (nasty, nasty, {nasty: nasty})
    assert q.dead_letters(error_contains="' OR '1'='1") == []
    assert q.send("again", dedup_id=nasty) == m.id


# -- bodies -------------------------------------------------------------------------------------


class Unpicklable:
    pass


BAD_BODIES = [
    {1, 2}, object(), Unpicklable(), float("nan"), float("inf"), -math.inf, {1: "int key"},
    {"ok": {("tuple", "key"): 1}}, [1, {2}], ("tuple", "body"), "lone surrogate \ud800",
    datetime(2026, 1, 1), Path("/etc/passwd"),
]


@pytest.mark.parametrize("body", BAD_BODIES, ids=lambda b: type(b).__name__)
def test_rule_27_bodies_that_are_not_json_or_bytes_are_rejected(broker: hailq.Broker,
                                                                body: Any) -> None:
    q = broker.queue("claims")
    q.send("keep me")

    rejected(broker, lambda: q.send(body), InvalidArgument, "body")
    rejected(broker, lambda: q.send_many(["fine", body]), InvalidArgument, "body")


def test_rule_27_too_deeply_nested_body_is_rejected(broker: hailq.Broker) -> None:
    q = broker.queue("claims")
    deep: Any = "bottom"
    for _ in range(200):
        deep = [deep]

    rejected(broker, lambda: q.send(deep), InvalidArgument, "nested")


def test_rule_27_bodies_over_max_message_size_are_rejected(broker: hailq.Broker) -> None:
    q = broker.queue("claims", max_message_size=100)

    text = rejected(broker, lambda: q.send("x" * 200), MessageTooLarge, "100")
    rejected(broker, lambda: q.send(b"\x00" * 101), MessageTooLarge, "max_message_size")
    rejected(broker, lambda: q.send_many(["small", b"y" * 101]), MessageTooLarge)

    assert "202" in text  # says how big the body was
    assert q.stats().sent == 0


def test_rule_27_the_default_limit_is_one_mebibyte(broker: hailq.Broker) -> None:
    q = broker.queue("claims")

    q.send(b"x" * (1024 * 1024))
    rejected(broker, lambda: q.send(b"x" * (1024 * 1024 + 1)), MessageTooLarge)

    assert q.stats().sent == 1


def test_rule_27_hailq_never_unpickles(broker: hailq.Broker, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"

    class Exploit:
        def __reduce__(self) -> tuple[Any, ...]:
            return (os.system, (f"touch {marker}",))

    payload = pickle.dumps(Exploit())
    q = broker.queue("claims")
    q.send(payload)

    (m,) = q.receive()
    assert m.body == payload
    assert not marker.exists()


# -- send options ----------------------------------------------------------------------------


@pytest.mark.parametrize("priority", [-1, 10, 100, 1.5, 9.0, "9", True, False, None],
                         ids=repr)
def test_rule_27_priorities_outside_0_to_9_are_rejected(broker: hailq.Broker,
                                                        priority: Any) -> None:
    q = broker.queue("claims")
    orders = broker.topic("orders")
    orders.subscribe("billing")

    rejected(broker, lambda: q.send("x", priority=priority), InvalidArgument, "0", "9")
    rejected(broker, lambda: q.send_many([Envelope("x", priority=priority)]))
    rejected(broker, lambda: orders.publish("x", priority=priority))


@pytest.mark.parametrize("delay", [-1, -0.001, math.nan, math.inf, "5", True, None,
                                   timedelta(seconds=-1), 10 * 365 * 86400], ids=repr)
def test_rule_27_bad_delays_are_rejected(broker: hailq.Broker, delay: Any) -> None:
    q = broker.queue("claims")

    rejected(broker, lambda: q.send("x", delay=delay), InvalidArgument, "delay")
    rejected(broker, lambda: q.send_many([Envelope("x", delay=delay)]))


@pytest.mark.parametrize("not_before", [
    datetime(2030, 1, 1), "2030-01-01", True, math.nan,
], ids=repr)
def test_rule_27_bad_not_before_is_rejected(broker: hailq.Broker, not_before: Any) -> None:
    q = broker.queue("claims")

    rejected(broker, lambda: q.send("x", not_before=not_before), InvalidArgument, "not_before")


def test_rule_27_delay_and_not_before_together_are_rejected(broker: hailq.Broker) -> None:
    q = broker.queue("claims")

    rejected(broker, lambda: q.send("x", delay=5, not_before=1e10), InvalidArgument,
             "not_before")


@pytest.mark.parametrize("headers", [
    "a=b", ["a", "b"], {"a": 1}, {1: "a"}, {"": "empty name"}, {"k": "nul\x00"},
    {"k": "x" * 5000}, {f"h{i}": "v" for i in range(100)},
], ids=lambda h: type(h).__name__)
def test_rule_27_bad_headers_are_rejected(broker: hailq.Broker, headers: Any) -> None:
    q = broker.queue("claims")

    rejected(broker, lambda: q.send("x", headers=headers), InvalidArgument, "header")


@pytest.mark.parametrize("key", ["", "k" * 256, 5, b"key", "nul\x00"], ids=repr)
def test_rule_27_bad_ordering_keys_and_dedup_ids_are_rejected(broker: hailq.Broker,
                                                              key: Any) -> None:
    q = broker.queue("claims")

    rejected(broker, lambda: q.send("x", ordering_key=key), InvalidArgument, "ordering_key")
    rejected(broker, lambda: q.send("x", dedup_id=key), InvalidArgument, "dedup_id")


# -- receive, ack, nack, extend ------------------------------------------------------------------


@pytest.mark.parametrize("kwargs", [
    {"max_messages": 0}, {"max_messages": 1001}, {"max_messages": True},
    {"max_messages": 2.0}, {"lease": 0}, {"lease": -1}, {"lease": math.nan},
    {"wait": -1}, {"wait": "1"},
], ids=repr)
def test_rule_27_bad_receive_arguments_are_rejected(broker: hailq.Broker,
                                                    kwargs: dict[str, Any]) -> None:
    q = broker.queue("claims")
    q.send("keep me")

    rejected(broker, lambda: q.receive(**kwargs), InvalidArgument)

    assert [m.attempt for m in q.receive()] == [1]


@pytest.mark.parametrize("receipt", ["abc", "", None, 42, "0" * 26, "not a receipt.0123"],
                         ids=repr)
def test_rule_27_malformed_receipts_are_rejected(broker: hailq.Broker, receipt: Any) -> None:
    q = broker.queue("claims")
    q.send("keep me")
    q.receive(lease=30)

    rejected(broker, lambda: q.ack(receipt), InvalidArgument, "receipt")
    rejected(broker, lambda: q.nack(receipt, delay=0), InvalidArgument, "receipt")
    rejected(broker, lambda: q.extend(receipt, 5), InvalidArgument, "receipt")
    rejected(broker, lambda: q.ack_many(["x", receipt]), InvalidArgument)


def test_rule_27_a_well_formed_but_unknown_receipt_is_lease_lost(broker: hailq.Broker) -> None:
    q = broker.queue("claims")
    q.send("keep me")
    (m,) = q.receive(lease=30)
    message_id, token, seq = m.receipt.split(".")[:3]  # id, token, position (then the claim)
    other = '0' * 16 if token != '0' * 16 else '1' * 16
    forged_token = f"{message_id}.{other}.{seq}"
    forged_position = f"{message_id}.{token}.{int(seq) + 1}"
    unknown_message = f"{'0' * 26}.{token}.{seq}"
    unknown_without_position = f"{'0' * 26}.{token}"

    for forged in (forged_token, forged_position, unknown_message, unknown_without_position):
        rejected(broker, lambda r=forged: q.ack(r), LeaseLost)
        rejected(broker, lambda r=forged: q.nack(r, delay=0), LeaseLost)
        rejected(broker, lambda r=forged: q.extend(r, 60), LeaseLost)

    m.ack()
    assert q.stats().acked == 1


def test_rule_27_a_receipt_without_the_row_position_still_works(
        broker: hailq.Broker) -> None:
    """Receipts made before they named the row's position (id.token) stay valid."""
    q = broker.queue("claims")
    q.send_many(["extend me", "nack me", "ack me"])
    first, second, third = q.receive(3, lease=30)
    def legacy(m: hailq.Message) -> str:
        return m.receipt.rpartition(".")[0]

    assert q.extend(legacy(first), 120) > first.lease_until
    q.nack(legacy(second), delay=0)
    q.ack(legacy(third))
    q.ack(first)
    assert [m.body for m in q.receive(5)] == ["nack me"]
    assert q.stats().acked == 2


def test_rule_27_a_receipt_of_another_queue_is_lease_lost(broker: hailq.Broker) -> None:
    claims = broker.queue("claims")
    audit = broker.queue("audit")
    claims.send("claim")
    (m,) = claims.receive()

    rejected(broker, lambda: audit.ack(m.receipt), LeaseLost)
    rejected(broker, lambda: audit.nack(m.receipt, delay=0), LeaseLost)

    m.ack()
    assert (claims.stats().acked, audit.stats().acked) == (1, 0)


def test_rule_27_bad_nack_and_extend_arguments_are_rejected(broker: hailq.Broker) -> None:
    q = broker.queue("claims")
    q.send("keep me")
    (m,) = q.receive(lease=30)

    rejected(broker, lambda: m.nack(delay=-1), InvalidArgument, "delay")
    rejected(broker, lambda: m.nack(delay=0, error=42), InvalidArgument, "error")  # type: ignore[arg-type]
    rejected(broker, lambda: m.extend(0), InvalidArgument)
    rejected(broker, lambda: m.extend(math.inf), InvalidArgument)

    rejected(broker, lambda: m.dead_letter(None), InvalidArgument, "reason")  # type: ignore[arg-type]

    m.ack()  # the lease survived every rejected call
    assert q.stats().acked == 1


@pytest.mark.parametrize("error", ["NUL \x00 inside", "lone \udce9 surrogate",
                                   "caf\udce9\x00"], ids=repr)
def test_rule_27_any_error_text_is_stored_escaped_alike_on_every_backend(
        broker: hailq.Broker, error: str) -> None:
    """An exception's text may hold what no database column can: it is kept, escaped,
    rather than failing the nack (a worker would lose the error and the backoff)."""
    q = broker.queue("claims", max_attempts=2)
    q.send("ok")
    (m,) = q.receive()
    m.nack(delay=0, error=error)
    (m,) = q.receive()
    m.dead_letter(error)
    (letter,) = q.dead_letters()
    expected = error.replace("\x00", "\\x00").encode("utf-8", "backslashreplace").decode()
    assert [e.error for e in letter.errors] == [expected, expected]
    assert "\\x00" in expected or "\\udce9" in expected  # the escape shows, not dropped
    assert [d.id for d in q.dead_letters(error_contains=expected[-8:])] == [letter.id]
    for bad in ("\x00", "\udce9"):
        rejected(broker, lambda b=bad: q.dead_letters(error_contains=b), InvalidArgument,
                 "error_contains")


def test_rule_27_single_items_where_a_batch_is_expected_are_rejected(
        broker: hailq.Broker) -> None:
    q = broker.queue("claims")
    q.send("keep me")
    (m,) = q.receive()
    orders = broker.topic("orders")
    orders.subscribe("audit")
    for batch in ("ab", b"ab", {"claim": 1}, 5):
        rejected(broker, lambda b=batch: q.send_many(b), InvalidArgument, "list")  # type: ignore[arg-type]
        rejected(broker, lambda b=batch: orders.publish_many(b), InvalidArgument, "list")  # type: ignore[arg-type]
    rejected(broker, lambda: q.ack_many(m.receipt), InvalidArgument, "ack_many")  # type: ignore[arg-type]
    rejected(broker, lambda: q.extend_many(m.receipt, 30), InvalidArgument, "extend_many")  # type: ignore[arg-type]
    assert q.send_many(iter(["a", "b"])) and q.stats().ready == 2  # any iterable still works
    m.ack()


def test_rule_27_integers_json_cannot_write_are_rejected(broker: hailq.Broker) -> None:
    q = broker.queue("claims")
    rejected(broker, lambda: q.send(10**5000), InvalidArgument, "json")
    assert q.receive() == []
    q.send(2**200)  # big, but JSON writes it, and it comes back exactly
    (m,) = q.receive()
    assert m.body == 2**200


def test_rule_27_bad_operator_arguments_are_rejected(broker: hailq.Broker) -> None:
    q = broker.queue("claims")
    q.send("keep me")

    rejected(broker, lambda: q.redrive(ids=["not-an-id"]), InvalidArgument, "id")
    rejected(broker, lambda: q.redrive(ids="01ARZ3NDEKTSV4RRFFQ69G5FAV"), InvalidArgument)
    rejected(broker, lambda: q.purge(dead="yes"), InvalidArgument)  # type: ignore[arg-type]
    rejected(broker, lambda: q.peek(0), InvalidArgument, "limit")
    rejected(broker, lambda: q.dead_letters(older_than=-1), InvalidArgument)
    rejected(broker, lambda: q.dead_letters(error_contains=5), InvalidArgument)  # type: ignore[arg-type]


# -- settings ----------------------------------------------------------------------------------


@pytest.mark.parametrize("settings", [
    {"leese": 5}, {"lease": 0}, {"lease": -1}, {"lease": "30"}, {"lease": math.nan},
    {"max_attempts": 0}, {"max_attempts": True}, {"max_attempts": 2.5},
    {"aging": 0}, {"aging": -1}, {"retry": {"bogus": 1}}, {"retry": {"factor": 0.5}},
    {"retry": {"jitter": 2}}, {"retry": 5}, {"retry": {"base": 10, "max": 5}},
    {"dedup_window": -1}, {"max_message_size": 0},
    {"max_message_size": 10**12}, {"max_in_flight": 0}, {"max_in_flight": False},
    {"on_dead": "drop"}, {"on_dead": None},
], ids=repr)
def test_rule_27_bad_settings_are_rejected_and_nothing_changes(
        broker: hailq.Broker, settings: dict[str, Any]) -> None:
    broker.queue("claims", lease=60)
    orders = broker.topic("orders")

    rejected(broker, lambda: broker.queue("claims", **settings))
    rejected(broker, lambda: broker.queue("fresh", **settings))
    rejected(broker, lambda: orders.subscribe("fresh", **settings))

    assert broker.get_queue("claims").settings.lease == 60.0
    assert [q.name for q in broker.queues()] == ["claims"]
    assert orders.subscriptions() == []


def test_rule_27_unknown_setting_names_what_is_allowed(broker: hailq.Broker) -> None:
    text = rejected(broker, lambda: broker.queue("claims", leese=5), InvalidArgument, "leese")

    assert "lease" in text.replace("leese", "")
    assert "max_attempts" in text


def test_rule_27_bad_subscription_filters_are_rejected(broker: hailq.Broker) -> None:
    orders = broker.topic("orders")

    for bad in ({}, {"region": 5}, {"region": []}, {"": "x"}, "region=eu", {"r": [1]},
                {"region": "eu\x00"}, {"region": ["eu", "\udce9"]}):
        rejected(broker, lambda f=bad: orders.subscribe("eu", filter=f), InvalidArgument,
                 "filter")


# -- URLs ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("url", "hint"), [
    ("", "url"), ("mysql://localhost/db", "sqlite:///"), ("sqlite://", "path"),
    ("sqlite:///", "path"), ("sqlite:relative.db", "path"), ("{dir}/no-scheme.db", "sqlite:///"),
    ("sqlite:///{dir}/x.db?bogus=1", "bogus"), ("sqlite:///{dir}/x.db?busy_timeout=abc",
                                                "busy_timeout"),
    ("sqlite:///{dir}/x.db?busy_timeout=-1", "busy_timeout"),
    ("sqlite:///{dir}/x.db?synchronous=maybe", "synchronous"),
    ("sqlite:///{dir}/x.db?poll_interval=0", "poll_interval"), (None, "sqlite:///"),
    (42, "url"), ("sqlite:///:memory:", "in-memory"), ("sqlite:///file::memory:", "in-memory"),
], ids=repr)
def test_rule_27_bad_urls_are_rejected_and_create_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: Any, hint: str) -> None:
    monkeypatch.chdir(tmp_path)  # a relative path would create its file here
    if isinstance(url, str):
        url = url.format(dir=tmp_path)
    if url is None:  # no URL: HAILQ_URL is used, here a bad one
        monkeypatch.setenv("HAILQ_URL", "mysql://localhost/db")

    with pytest.raises(InvalidArgument) as caught:
        hailq.connect(url)

    assert hint.lower() in str(caught.value).lower()
    assert list(tmp_path.iterdir()) == []


def test_rule_27_bad_postgres_url_options_are_rejected(pg_url: str) -> None:
    for option in ("pool_size=abc", "pool_size=0", "pool_size=2.5", "poll_interval=-1"):
        with pytest.raises(InvalidArgument, match=option.split("=")[0]):
            hailq.connect(f"{pg_url}&{option}")


@pytest.mark.parametrize("schema", ["claims.prod", "s" * 64, "claims-prod", "9claims", "Claims",
                                    ""])
def test_rule_27_bad_postgres_schema_names_are_refused_not_changed(pg_url: str,
                                                                  schema: str) -> None:
    base = pg_url.rsplit("schema=", 1)[0].rstrip("?&")
    with pytest.raises(InvalidArgument, match="schema name"):
        hailq.connect(f"{base}?schema={schema}")

    with psycopg.connect(base) as conn:
        made = conn.execute("SELECT nspname FROM pg_namespace WHERE nspname IN (%s, %s, %s)",
                            (schema, schema.replace(".", "_"), schema[:63])).fetchall()
    assert made == []
