"""SPEC rules 13-15: dead messages, the dead-letter queue, poison messages."""

from __future__ import annotations

import time

import hailq
from hailq import Envelope

from .helpers import advance, receive_all

# -- rule 13: becoming dead ------------------------------------------------------------------


def test_rule_13_message_nacked_on_its_last_attempt_is_dead(broker: hailq.Broker) -> None:
    q = broker.queue("claims", max_attempts=3)
    sent = q.send({"claim": 666})

    for n in range(1, 4):
        (m,) = q.receive()
        assert m.attempt == n
        m.nack(delay=0, error=f"parse error on attempt {n}")
    before_death = time.time()

    assert q.receive() == []
    (dead,) = q.dead_letters()
    assert dead.id == sent
    assert dead.body == {"claim": 666}
    assert dead.attempt == 3
    assert [(e.attempt, e.error) for e in dead.errors] == [
        (1, "parse error on attempt 1"), (2, "parse error on attempt 2"),
        (3, "parse error on attempt 3")]
    assert dead.last_error == "parse error on attempt 3"
    assert abs(dead.dead_at - before_death) < 30
    stats = q.stats()
    assert (stats.dead, stats.dead_lettered, stats.ready, stats.in_flight) == (1, 1, 0, 0)


def test_rule_13_message_that_kills_its_consumer_dies_by_lease_expiry(
        broker: hailq.Broker) -> None:
    q = broker.queue("claims", max_attempts=2, lease=0.2)
    sent = q.send("kills the handler")

    for n in (1, 2):
        (m,) = q.receive()
        assert m.attempt == n  # counted at receive, though the consumer never reports back
        advance(broker, 0.3)

    assert q.receive() == []
    (dead,) = q.dead_letters()
    assert (dead.id, dead.attempt) == (sent, 2)
    assert [e.attempt for e in dead.errors] == [1, 2]
    assert all(e.error for e in dead.errors)
    assert q.stats().dead == 1


def test_rule_13_dead_letter_kills_now_whatever_attempts_are_left(broker: hailq.Broker) -> None:
    q = broker.queue("claims", max_attempts=5)
    q.send("not a claim at all")
    (m,) = q.receive()

    m.dead_letter("schema violation: no claim number")

    assert q.receive() == []
    (dead,) = q.dead_letters()
    assert dead.attempt == 1
    assert dead.last_error == "schema violation: no claim number"
    assert q.stats().dead_lettered == 1


def test_rule_13_a_dead_message_is_never_delivered_again(broker: hailq.Broker) -> None:
    q = broker.queue("claims", max_attempts=1, lease=0.2)
    q.send("once")
    q.receive()[0].nack(delay=0, error="no")

    advance(broker, 0.3)

    assert q.receive(max_messages=10, wait=0.3) == []
    assert q.peek() == []
    assert q.stats().dead == 1


# -- rule 14: list, filter, redrive, purge --------------------------------------------------


def kill(q: hailq.Queue, error: str) -> None:
    (m,) = q.receive()
    m.dead_letter(error)


def test_rule_14_dead_letters_filter_by_error_age_and_key(broker: hailq.Broker) -> None:
    q = broker.queue("claims")
    q.send_many([Envelope("a", ordering_key="policy-1"), Envelope("b", ordering_key="policy-2"),
                 Envelope("c")])
    kill(q, "timeout calling OCR")
    advance(broker, 0.4)
    kill(q, "invalid IBAN")
    kill(q, "timeout calling fraud check")

    assert [d.body for d in q.dead_letters()] == ["a", "b", "c"]
    assert [d.body for d in q.dead_letters(error_contains="timeout")] == ["a", "c"]
    assert [d.body for d in q.dead_letters(ordering_key="policy-2")] == ["b"]
    assert [d.body for d in q.dead_letters(older_than=0.3)] == ["a"]
    assert q.dead_letters(error_contains="no such error") == []
    assert len(q.dead_letters(limit=2)) == 2


def test_rule_14_error_filter_matches_text_with_quotes_and_unicode(broker: hailq.Broker) -> None:
    q = broker.queue("claims")
    q.send_many(["a", "b"])
    kill(q, 'field "iban" is empty')
    kill(q, "Prüfziffer falsch \\ ungültig")

    assert [d.body for d in q.dead_letters(error_contains='"iban"')] == ["a"]
    assert [d.body for d in q.dead_letters(error_contains="Prüfziffer")] == ["b"]
    assert [d.body for d in q.dead_letters(error_contains="\\ ungültig")] == ["b"]


def test_rule_14_redrive_returns_dead_messages_with_attempt_reset(broker: hailq.Broker) -> None:
    q = broker.queue("claims", max_attempts=2)
    sent = q.send("retry me later")
    for _ in range(2):
        q.receive()[0].nack(delay=0, error="downstream down")
    assert q.receive() == []

    assert q.redrive() == 1

    assert q.dead_letters() == []
    (m,) = q.receive()
    assert (m.id, m.attempt, m.body) == (sent, 1, "retry me later")
    m.nack(delay=0)
    assert q.receive()[0].attempt == 2  # a full set of attempts again


def test_rule_14_redrive_of_chosen_ids_leaves_the_rest_dead(broker: hailq.Broker) -> None:
    q = broker.queue("claims")
    ids = q.send_many(["a", "b", "c"])
    for _ in ids:
        kill(q, "bad")

    assert q.redrive(ids=[ids[1]]) == 1

    assert [m.body for m in receive_all(q)] == ["b"]
    assert sorted(d.id for d in q.dead_letters()) == sorted([ids[0], ids[2]])


def test_rule_14_redrive_keeps_the_order_of_a_key(broker: hailq.Broker) -> None:
    q = broker.queue("claims", on_dead="continue")
    first, second = q.send_many([Envelope("first", ordering_key="policy-9"),
                                 Envelope("second", ordering_key="policy-9")])
    kill(q, "bad")  # first dies; the key flows on
    kill(q, "bad")  # second dies too

    assert q.redrive() == 2

    (m,) = q.receive(max_messages=10)
    assert m.id == first
    assert q.receive(max_messages=10) == []  # second waits behind first
    m.ack()
    assert [x.id for x in q.receive(max_messages=10)] == [second]


def test_rule_14_purge_dead_deletes_only_dead_messages(broker: hailq.Broker) -> None:
    q = broker.queue("claims")
    q.send_many(["dies", "dies too", "lives"])
    kill(q, "bad")
    kill(q, "bad")

    assert q.purge(dead=True) == 2

    assert q.dead_letters() == []
    assert q.stats().dead == 0
    assert [m.body for m in receive_all(q)] == ["lives"]


def test_rule_14_purge_live_deletes_live_messages_and_keeps_the_dead(
        broker: hailq.Broker) -> None:
    q = broker.queue("claims")
    q.send_many(["dies", "ready", "ready too"])
    q.send("scheduled", delay=60)
    kill(q, "bad")

    assert q.purge(dead=False) == 3

    assert q.receive(max_messages=10) == []
    stats = q.stats()
    assert (stats.ready, stats.delayed, stats.dead) == (0, 0, 1)
    assert [d.body for d in q.dead_letters()] == ["dies"]


# -- rule 15: one poison message never stops the others -------------------------------------


def test_rule_15_poison_message_goes_dead_while_1000_others_flow(broker: hailq.Broker) -> None:
    """The others flow between the poison's attempts (during its backoff), not only after
    it is dead, and go on flowing once it is dead.

    "Between" counts only receives made after the poison was nacked and before it came
    back: others that shared a claim with the poison do not count. Each other message
    takes two milliseconds of work, so the 1,000 outlast the poison's three attempts (its
    backoff is 0.25 s, then 0.5 s) by far, however fast the machine; a claim of ten
    handled in less than the first backoff (a slow machine's, through hailq.aio, too)
    leaves room for others between the attempts.
    """
    q = broker.queue("claims", max_attempts=3, retry={"base": 0.25, "factor": 2, "jitter": 0})
    poison = q.send({"poison": True})
    q.send_many([{"claim": n} for n in range(1000)])
    acked: list[int] = []
    poison_attempts: list[int] = []
    claims: list[tuple[int | None, int]] = []  # per receive: poison attempt in it, others

    def handle(m: hailq.Message) -> None:
        if m.body.get("poison"):
            poison_attempts.append(m.attempt)
            m.nack(error=f"cannot parse claim (attempt {m.attempt})")
        else:
            time.sleep(0.002)  # the handler's work
            acked.append(m.body["claim"])
            m.ack()

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        messages = q.receive(max_messages=10, wait=0.2)
        attempt = next((m.attempt for m in messages if m.body.get("poison")), None)
        claims.append((attempt, sum(1 for m in messages if not m.body.get("poison"))))
        for m in messages:
            handle(m)
        if not messages:
            stats = q.stats()
            if stats.backlog == 0 and stats.in_flight == 0:
                break

    assert sorted(acked) == list(range(1000))
    assert poison_attempts == [1, 2, 3]
    at = {attempt: i for i, (attempt, _) in enumerate(claims) if attempt is not None}
    for start, end, when in ((at[1], at[2], "between attempts 1 and 2"),
                             (at[2], at[3], "between attempts 2 and 3"),
                             (at[3], len(claims), "after the poison died")):
        others = sum(n for _, n in claims[start + 1:end])
        assert others > 0, f"no other message was received {when}"
    (dead,) = q.dead_letters()
    assert (dead.id, dead.attempt) == (poison, 3)
    assert [e.error for e in dead.errors] == [
        f"cannot parse claim (attempt {n})" for n in (1, 2, 3)]
    stats = q.stats()
    assert (stats.acked, stats.dead, stats.dead_lettered) == (1000, 1, 1)

    assert q.redrive() == 1
    (again,) = q.receive()
    assert (again.id, again.attempt) == (poison, 1)
    again.dead_letter("still poison")
    assert q.purge(dead=True) == 1
    assert q.dead_letters() == []
    assert q.stats().dead == 0
