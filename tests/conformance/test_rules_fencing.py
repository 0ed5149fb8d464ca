"""SPEC rule 41's last sentence: a received message carries a fencing token that grows
with every lease, of the message and of its ordering key.

A downstream outside hailq's database keeps the highest token it has seen per key and
refuses a write carrying a lower one (docs/concepts/leases.md; the MariaDB side is
tested in tests/stacks/test_fencing_mariadb.py). These tests check the promise it relies
on: every lease's token is higher than those of every lease of the same message or key
before it, on every path a claim takes, and no two leases share one.
"""

from __future__ import annotations

import threading
from typing import Any

import hailq

from .helpers import advance, receive_all


def test_rule_41_a_message_gets_a_higher_token_with_every_lease(broker: hailq.Broker) -> None:
    q = broker.queue("claims", max_attempts=10)
    q.send({"claim": 8320})

    tokens, attempts = [], []
    for _ in range(4):  # given back three times: four leases of one message
        (m,) = q.receive()
        tokens.append(m.fencing_token)
        attempts.append(m.attempt)
        if m.attempt < 4:
            m.nack(delay=0, error="photo server busy")
    m.ack()

    assert attempts == [1, 2, 3, 4]
    assert tokens == sorted(set(tokens)) and tokens[0] >= 1


def test_rule_41_the_checker_slower_than_its_lease_holds_the_lower_token(
        broker: hailq.Broker) -> None:
    """The seed's case: the lease of a slow checker ends and the claim goes to another;
    the slow one's token is the lower, which is what a downstream refuses."""
    q = broker.queue("claims")
    q.send({"claim": 8321})
    (slow,) = q.receive(lease=0.2)
    advance(broker, 0.3)  # its lease ends while it still works

    (fast,) = q.receive()

    assert fast.id == slow.id and fast.attempt == 2
    assert fast.fencing_token > slow.fencing_token
    fast.ack()


def test_rule_41_tokens_grow_along_an_ordering_key(broker: hailq.Broker) -> None:
    q = broker.queue("claims")
    q.send_many([hailq.Envelope({"step": i}, ordering_key="contract-7") for i in range(3)]
                + [hailq.Envelope({"other": i}) for i in range(3)])

    seen: list[tuple[Any, int]] = []
    while messages := q.receive(max_messages=10):
        for m in messages:
            seen.append((m.body, m.fencing_token))
            m.ack()

    keyed = [token for body, token in seen if "step" in body]
    assert [body["step"] for body, _ in seen if "step" in body] == [0, 1, 2]
    assert keyed == sorted(keyed) and len(set(keyed)) == 3
    assert len({token for _, token in seen}) == 6


def test_rule_41_a_redrive_resets_the_attempt_but_not_the_token(broker: hailq.Broker) -> None:
    q = broker.queue("claims", max_attempts=1)
    sent = q.send({"claim": 8322})
    (first,) = q.receive()
    first.nack(delay=0, error="downstream down")  # its last attempt: dead
    assert q.redrive() == 1

    (again,) = q.receive()

    assert (again.id, again.attempt) == (sent, 1)
    assert again.fencing_token > first.fencing_token


def test_rule_41_the_fused_ack_and_claim_draws_tokens_in_claim_order(
        broker: hailq.Broker, backend_name: str) -> None:
    """ack_and_receive takes, on PostgreSQL, one statement for the acks and the claim
    (message_ack_claim); its tokens come from the same sequence as a plain claim's, and
    a batch's tokens grow in the order it hands the messages out."""
    q = broker.queue("claims")
    q.send_many([{"n": i} for i in range(30)])
    dialect = broker.backend.dialect  # type: ignore[attr-defined]
    fused: list[int] = []
    plain_ack_claim = dialect.ack_claim

    def counted(*args: Any) -> Any:
        found = plain_ack_claim(*args)
        if found is not None:
            fused.append(len(found[1]))
        return found

    dialect.ack_claim = counted
    held = q.receive(max_messages=3)
    tokens = [m.fencing_token for m in held]
    while held:
        _, held = q.ack_and_receive(held, max_messages=3)
        tokens += [m.fencing_token for m in held]

    assert len(tokens) == 30
    assert tokens == sorted(tokens) and len(set(tokens)) == 30
    if backend_name == "postgres":  # SQLite has no fused statement (one writer: no gain)
        assert sum(fused) > 0


def test_rule_41_concurrent_claimers_never_share_a_token(url: str) -> None:
    """Four consumers claim and ack at once, each through its own broker, half of them
    through the fused path: every lease gets a token of its own, and each consumer's
    tokens grow in the order it received."""
    with hailq.connect(url) as broker:
        q = broker.queue("claims", max_attempts=10)
        q.send_many([{"n": i} for i in range(400)])
    start = threading.Barrier(4)
    leases: list[list[tuple[str, int, int]]] = [[] for _ in range(4)]
    errors: list[BaseException] = []

    def consume(n: int) -> None:
        try:
            with hailq.connect(url) as mine:
                queue = mine.get_queue("claims")
                start.wait(30)
                held = queue.receive(max_messages=5)
                while held:
                    leases[n] += [(m.id, m.attempt, m.fencing_token) for m in held]
                    if n % 2:
                        _, held = queue.ack_and_receive(held, max_messages=5)
                    else:
                        held[0].nack(delay=0)  # some leases of one message, some of many
                        queue.ack_many(held[1:])
                        held = queue.receive(max_messages=5)
        except BaseException as exc:  # reported by the test below
            errors.append(exc)

    threads = [threading.Thread(target=consume, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)

    assert not errors, errors
    every = [token for mine in leases for _, _, token in mine]
    assert len(every) == len(set(every)) >= 400  # every lease its own token
    for mine in leases:
        assert [t for _, _, t in mine] == sorted(t for _, _, t in mine)
    by_message: dict[str, list[tuple[int, int]]] = {}
    for mine in leases:
        for message_id, attempt, token in mine:
            by_message.setdefault(message_id, []).append((attempt, token))
    assert len(by_message) == 400
    for found in by_message.values():  # a message's later leases: higher tokens
        assert [t for _, t in sorted(found)] == sorted(t for _, t in found)


def test_rule_41_tokens_keep_growing_across_queues_and_a_reconnect(url: str) -> None:
    """One sequence for the whole database: a queue deleted and declared again, or a
    broker opened afresh, never hands out a token that was handed out before."""
    with hailq.connect(url) as broker:
        q = broker.queue("claims")
        q.send_many(range(3))
        before = [m.fencing_token for m in receive_all(q)]
        broker.delete_queue("claims", force=True)
    with hailq.connect(url) as broker:
        other = broker.queue("photos")
        other.send("x")
        again = broker.queue("claims")
        again.send("y")
        after = [m.fencing_token for m in receive_all(other) + receive_all(again)]

    assert min(after) > max(before)
