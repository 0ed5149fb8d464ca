"""SPEC rule 41: deadline order. A queue with ``order="deadline"`` serves first the
message whose deadline (available_at + its priority's target) comes first: after a
nack, a lease's end and a redrive the deadline runs from the new available_at; a
change of targets or order re-sorts the live messages; a priority without a target
gets one interpolated between its neighbours'.

Targets here are fractions of a second so that the time let pass between sends
(``advance``: at once on SQLite's injected clock) moves deadlines past each other; the
sort keys themselves are read from the database.
"""

from __future__ import annotations

import math

import pytest

import hailq
from hailq import Envelope
from hailq.errors import InvalidArgument

from .helpers import RawDatabase, advance, receive_all, wait_until

TIGHT = {9: 0.2, 5: 1.0, 0: 60.0}


def messages(raw: RawDatabase) -> str:
    return raw.table("hailq_messages" if raw.is_sqlite else "messages")


def keys(raw: RawDatabase, queue: str) -> dict[int, float]:
    """priority -> sort_key - available_at (the target a live message's key used)."""
    found = raw.execute(f"SELECT priority, sort_key - available_at FROM {messages(raw)} "
                        "WHERE queue = ?", (queue,))
    return {int(p): float(k) for p, k in found}


def bodies(q: hailq.Queue, batch: int = 10) -> list[object]:
    return [m.body for m in receive_all(q, batch=batch)]


def test_rule_41_an_earlier_deadline_goes_before_a_higher_priority(
        broker: hailq.Broker) -> None:
    strict = broker.queue("strict", slo=TIGHT)
    q = broker.queue("claims", slo=TIGHT, order="deadline")
    for queue in (strict, q):
        queue.send("normal", priority=5)  # due in 1 s
    advance(broker, 0.9)  # the scenario: the first deadline draws near
    for queue in (strict, q):  # due in 0.2 s: after the normal one
        queue.send_many([Envelope("urgent 1", priority=9), Envelope("urgent 2", priority=9)])
        queue.send("bulk", priority=0)

    assert bodies(strict) == ["urgent 1", "urgent 2", "normal", "bulk"]
    assert bodies(q) == ["normal", "urgent 1", "urgent 2", "bulk"]


def test_rule_41_a_higher_priority_within_its_target_still_goes_first(
        broker: hailq.Broker) -> None:
    q = broker.queue("claims", slo=TIGHT, order="deadline")
    q.send("normal", priority=5)
    q.send("urgent", priority=9)  # due 0.2 s from now, the normal one 1 s from then

    assert bodies(q) == ["urgent", "normal"]


def test_rule_41_a_priority_without_a_target_gets_one_interpolated(
        broker: hailq.Broker, raw: RawDatabase) -> None:
    q = broker.queue("claims", slo={9: 10, 0: 3600}, order="deadline")
    q.send_many([Envelope(f"p{p}", priority=p) for p in range(10)])

    found = keys(raw, "claims")
    # Geometric between the nearest targets: 10 * 360 ** (k / 9) for priority 9 - k.
    for p in range(10):
        assert found[p] == pytest.approx(10 * 360 ** ((9 - p) / 9), rel=1e-6)
    assert found[5] == pytest.approx(136.8, abs=0.1)
    assert found[8] < found[0] / 100  # not the loosest target


def test_rule_41_above_and_below_the_named_targets_the_nearest_one_holds(
        broker: hailq.Broker, raw: RawDatabase) -> None:
    q = broker.queue("claims", slo={7: 10, 3: 1000}, order="deadline")
    q.send_many([Envelope(f"p{p}", priority=p) for p in (9, 8, 2, 0)])

    assert keys(raw, "claims") == pytest.approx({9: 10, 8: 10, 2: 1000, 0: 1000})


@pytest.mark.parametrize("how", ["configure", "declare"])
def test_rule_41_changing_the_order_resorts_the_live_messages(
        broker: hailq.Broker, how: str) -> None:
    q = broker.queue("claims", slo={9: 0.1, 0: 0.3})
    q.send("old bulk", priority=0)  # due 0.3 s from now
    advance(broker, 0.4)  # the scenario: the bulk one's deadline passes
    q.send("new urgent", priority=9)  # due 0.1 s after it: later than the bulk one

    if how == "configure":
        q.configure(order="deadline")
    else:
        q = broker.queue("claims", order="deadline")
    assert q.settings.order == "deadline"
    assert bodies(q, batch=1) == ["old bulk", "new urgent"]

    q.send("old bulk", priority=0)
    q.send("new urgent", priority=9)
    q.configure(order="priority") if how == "configure" else broker.queue(
        "claims", order="priority")
    assert bodies(q) == ["new urgent", "old bulk"]


def test_rule_41_changing_the_targets_resorts_the_live_messages(
        broker: hailq.Broker, raw: RawDatabase) -> None:
    q = broker.queue("claims", slo={9: 10, 0: 100}, order="deadline")
    q.send("urgent", priority=9)
    q.send("bulk", priority=0)
    assert keys(raw, "claims") == pytest.approx({9: 10, 0: 100})

    q.configure(slo={9: 500, 0: 50})

    assert keys(raw, "claims") == pytest.approx({9: 500, 0: 50})
    assert bodies(q) == ["bulk", "urgent"]


def test_rule_41_a_nacked_message_is_due_from_its_new_available_at(
        broker: hailq.Broker, raw: RawDatabase) -> None:
    q = broker.queue("claims", slo=TIGHT, order="deadline")
    q.send("normal", priority=5)
    (m,) = q.receive()
    advance(broker, 0.9)  # the scenario: the first deadline draws near
    q.send("urgent", priority=9)  # due before the normal one's first deadline passes...
    m.nack(delay=0)  # ...but the retry is due 1 s from now

    assert keys(raw, "claims") == pytest.approx({5: 1.0, 9: 0.2})
    assert bodies(q) == ["urgent", "normal"]


def test_rule_41_a_retry_after_a_delay_is_due_a_target_after_the_delay(
        broker: hailq.Broker, raw: RawDatabase) -> None:
    q = broker.queue("claims", slo=TIGHT, order="deadline")
    q.send("normal", priority=5)
    before = raw.now()
    (m,) = q.receive()
    m.nack(delay=30)

    (key,) = raw.execute(f"SELECT sort_key, available_at FROM "
                         f"{messages(raw)}")
    assert key[1] >= before + 30
    assert key[0] == pytest.approx(key[1] + 1.0)


def test_rule_41_a_lease_that_ends_makes_the_message_due_from_its_end(
        broker: hailq.Broker) -> None:
    q = broker.queue("claims", slo=TIGHT, order="deadline")
    q.send("normal", priority=5)  # due 1 s from now
    assert len(q.receive(lease=0.3)) == 1  # the lease ends after 0.3 s: due at 1.3 s
    advance(broker, 0.9)  # the scenario: the first deadline draws near
    q.send("urgent", priority=9)  # due at 1.1 s

    assert [m.body for m in q.receive(max_messages=2)] == ["urgent", "normal"]


def test_rule_41_a_redriven_message_is_due_from_its_redrive(
        broker: hailq.Broker, raw: RawDatabase) -> None:
    q = broker.queue("claims", slo=TIGHT, order="deadline", max_attempts=1)
    q.send("normal", priority=5)
    (m,) = q.receive()
    m.nack()  # dead after its only attempt
    advance(broker, 0.9)  # the scenario: the first deadline draws near
    q.send("urgent", priority=9)
    before = raw.now()

    assert q.redrive() == 1

    ((key, available_at),) = raw.execute(
        f"SELECT sort_key, available_at FROM {messages(raw)} WHERE priority = 5")
    assert available_at >= before - 0.05
    assert key == pytest.approx(available_at + 1.0)
    assert bodies(q) == ["urgent", "normal"]


def test_rule_41_a_key_still_goes_one_at_a_time_in_send_order(broker: hailq.Broker) -> None:
    q = broker.queue("claims", slo=TIGHT, order="deadline")
    q.send_many([Envelope("k normal 1", priority=5, ordering_key="k"),
                 Envelope("k urgent 2", priority=9, ordering_key="k")])
    advance(broker, 0.9)  # the scenario: the first deadline draws near
    q.send("urgent", priority=9)  # due later than the key's head

    delivered = []
    while batch := q.receive(max_messages=10):
        assert sum(1 for m in batch if m.ordering_key == "k") <= 1
        delivered += [m.body for m in batch]
        for m in batch:
            m.ack()
    assert delivered[0] == "k normal 1"
    assert delivered.index("k normal 1") < delivered.index("k urgent 2")
    assert sorted(delivered) == ["k normal 1", "k urgent 2", "urgent"]


def test_rule_41_with_max_in_flight_each_claim_takes_the_earliest_deadline(
        broker: hailq.Broker) -> None:
    q = broker.queue("claims", slo=TIGHT, order="deadline", max_in_flight=1)
    q.send("normal", priority=5)
    advance(broker, 0.9)  # the scenario: the first deadline draws near
    q.send("urgent", priority=9)
    q.send("bulk", priority=0)

    delivered = []
    while batch := q.receive(max_messages=10):
        assert len(batch) == 1  # the cap
        delivered.append(batch[0].body)
        batch[0].ack()
    assert delivered == ["normal", "urgent", "bulk"]


def test_rule_41_a_paused_deadline_queue_leases_nothing(broker: hailq.Broker) -> None:
    q = broker.queue("claims", slo=TIGHT, order="deadline", rate="1000/s")
    q.send("normal", priority=5)
    q.pause()
    assert q.receive() == []
    q.resume()
    assert [m.body for m in q.receive()] == ["normal"]


def test_rule_41_deadline_order_and_aging_are_one_or_the_other(broker: hailq.Broker) -> None:
    with pytest.raises(InvalidArgument, match="one or the other"):
        broker.queue("claims", slo=TIGHT, order="deadline", aging=5)
    with pytest.raises(InvalidArgument, match="needs service-level targets"):
        broker.queue("claims", order="deadline")
    with pytest.raises(InvalidArgument, match="order must be"):
        broker.queue("claims", order="edf")
    assert broker.queues() == []

    q = broker.queue("claims", slo=TIGHT, order="deadline")
    with pytest.raises(InvalidArgument, match="one or the other"):
        q.configure(aging=5)
    with pytest.raises(InvalidArgument, match="needs service-level targets"):
        q.configure(slo=None)
    assert broker.get_queue("claims").overrides == {}
    q.configure(order="priority", aging=5)  # both in one change: fine
    assert broker.get_queue("claims").settings.aging == 5


def test_rule_41_the_interpolation_is_geometric() -> None:
    from hailq.policy.deadlines import targets_of

    assert targets_of({9: 10, 0: 3600})[5] == pytest.approx(math.exp(
        math.log(10) + 4 / 9 * (math.log(3600) - math.log(10))))


def test_rule_41_an_operator_switches_the_order_with_hailq_configure(
        broker: hailq.Broker, url: str) -> None:
    import os
    import subprocess
    import sys

    q = broker.queue("claims", slo={9: 0.1, 0: 0.3})
    q.send("old bulk", priority=0)
    advance(broker, 0.4)  # the scenario: the bulk one's deadline passes
    q.send("new urgent", priority=9)
    env = {k: v for k, v in os.environ.items() if k != "HAILQ_URL"}

    def configure(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "hailq.cli.main", "configure", "claims",
                               *args, "--url", url], capture_output=True, text=True,
                              env=env, timeout=120, stdin=subprocess.DEVNULL)

    done = configure("--order", "deadline")
    assert done.returncode == 0, done.stderr
    assert "deadline" in done.stdout
    refused = configure("--aging", "5")
    assert refused.returncode != 0 and "one or the other" in refused.stderr
    assert bodies(broker.get_queue("claims")) == ["old bulk", "new urgent"]


def test_rule_41_a_scheduled_message_is_due_its_priority_target_after_it_is_sent(
        broker: hailq.Broker, raw: RawDatabase) -> None:
    from hailq.runtime.scheduler import Scheduler

    broker.queue("ticks", slo={9: 10, 0: 3600}, order="deadline")
    broker.schedule(every=1, queue="ticks", body="tick", name="tick", priority=9)
    scheduler = Scheduler(broker, tick=0.01)

    def fired() -> bool:
        scheduler.run_once()
        return broker.get_schedule("tick").fired >= 1

    wait_until(fired, timeout=10)

    assert keys(raw, "ticks") == pytest.approx({9: 10.0})


def test_rule_41_a_published_copy_is_due_by_its_subscription_queues_targets(
        broker: hailq.Broker, raw: RawDatabase) -> None:
    orders = broker.topic("orders")
    orders.subscribe("billing", slo={9: 10, 0: 3600}, order="deadline")
    orders.subscribe("shipping")
    orders.publish("order", priority=9)

    assert keys(raw, "billing") == pytest.approx({9: 10.0})
    assert keys(raw, "shipping") == {9: pytest.approx(-9.0 - raw.execute(
        f"SELECT available_at FROM {messages(raw)} WHERE queue = 'shipping'")[0][0])}
