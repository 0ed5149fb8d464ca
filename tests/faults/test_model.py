"""Model checking (SPEC rules 4-17): a Hypothesis state machine drives a real backend.

Each step runs on the real queue and on ``model.QueueModel``; after every step
the two must agree. Checked: receive returns exactly the messages the model
says are receivable, in priority (or aging) order, each with its attempt
count one higher than before (attempts never decrease except by redrive);
no message ever has two valid leases (a stale receipt raises LeaseLost and
changes nothing); per-key order with one in flight; dedup; dead after
max_attempts; redrive; and stats() puts every message in exactly one state.

SQLite runs with an injected clock, so leases end and delays pass exactly
when the model says. PostgreSQL uses the database clock, so its machine only
has the time-independent rules (long leases, no delays, no time passing).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import hailq

from .model import QueueModel

KEYS = st.sampled_from([None, None, "a", "b"])
DEDUP = st.sampled_from([None, None, None, "d1", "d2"])
_counter = itertools.count()


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


class QueueMachine(RuleBasedStateMachine):
    """Shared rules; subclasses set the broker, the clock and which rules are on."""

    broker: hailq.Broker
    clock: FakeClock | None = None
    LEASE = 10.0
    MAX_ATTEMPTS = 2
    AGING: float | None = None

    def __init__(self) -> None:
        super().__init__()
        self.q = self.broker.queue(f"m{next(_counter)}", lease=self.LEASE,
                                   max_attempts=self.MAX_ATTEMPTS, aging=self.AGING,
                                   dedup_window=3600)
        self.model = QueueModel(self.LEASE, self.MAX_ATTEMPTS, self.AGING)
        self.receipts: list[tuple[str, str]] = []  # (message id, receipt) the consumer holds
        self.bodies = itertools.count()

    def now(self) -> float:
        return self.clock.now if self.clock else 0.0

    # -- rules -----------------------------------------------------------------------------------

    def _send(self, priority: int, key: str | None, delay: float, dedup: str | None) -> None:
        body = {"b": next(self.bodies)}
        got = self.q.send(body, priority=priority, ordering_key=key, delay=delay,
                          dedup_id=dedup)
        expected = self.model.send(got, body, priority, key, delay, dedup, self.now())
        assert got == expected, "a repeated dedup id must return the first message's id"

    @rule(n=st.integers(1, 4))
    def receive(self, n: int) -> None:
        expected = [m.id for m in self.model.receivable(self.now())[:n]]
        attempts = {i: self.model.messages[i].attempt for i in expected}
        got = self.q.receive(max_messages=n, lease=self.LEASE)
        assert [m.id for m in got] == expected, (
            f"received {[(m.id[-4:], m.priority, m.ordering_key) for m in got]}, model "
            f"expected {[(i[-4:], self.model.messages[i].priority) for i in expected]}")
        for m in got:
            assert m.attempt == attempts[m.id] + 1, "attempt must grow by one per receive"
            assert m.body == self.model.messages[m.id].body
        self.model.receive([(m.id, m.receipt) for m in got], self.now())
        self.receipts.extend((m.id, m.receipt) for m in got)

    def _pick(self, i: int) -> tuple[str, str]:
        return self.receipts[i % len(self.receipts)]

    @precondition(lambda self: self.receipts)
    @rule(i=st.integers(0, 100))
    def ack(self, i: int) -> None:
        message_id, receipt = self._pick(i)
        m = self.model.current(message_id, receipt)
        if m is None:
            with pytest.raises(hailq.LeaseLost):
                self.q.ack(receipt)
            return
        self.q.ack(receipt)  # in time, or late: nobody received it since (rule 9)
        self.model.ack(message_id)

    @precondition(lambda self: self.receipts)
    @rule(i=st.integers(0, 100), delay=st.sampled_from([0, 0, 2.0]))
    def nack(self, i: int, delay: float) -> None:
        message_id, receipt = self._pick(i)
        delay = delay if self.clock else 0
        m = self.model.current(message_id, receipt)
        if m is None:
            with pytest.raises(hailq.LeaseLost):
                self.q.nack(receipt, delay=delay, error="model nack")
            return
        if m.state == "dead":
            return  # dead by an ended lease: whether a nack still finds it is unspecified
        self.q.nack(receipt, delay=delay, error="model nack")
        self.model.nack(message_id, delay, self.now())

    @precondition(lambda self: self.receipts)
    @rule(i=st.integers(0, 100), seconds=st.sampled_from([1.0, 20.0]))
    def extend(self, i: int, seconds: float) -> None:
        message_id, receipt = self._pick(i)
        m = self.model.current(message_id, receipt)
        if m is None:
            with pytest.raises(hailq.LeaseLost):
                self.q.extend(receipt, seconds)
            return
        if m.state == "dead":
            return  # see nack
        self.q.extend(receipt, seconds)
        self.model.extend(message_id, seconds, self.now())

    @rule()
    def crash(self) -> None:
        """The consumer dies: its receipts are gone, its leases run out by themselves."""
        self.receipts.clear()

    # Ended leases are settled by the next receive; the lone test below holds hailq to rule 13
    # without one, and the machine redrives only once they are settled.
    @precondition(lambda self: not self.model.expired_unseen)
    @rule()
    def redrive(self) -> None:
        assert self.q.redrive() == self.model.redrive(self.now())

    # -- checks after every step -----------------------------------------------------------------

    @invariant()
    def every_message_in_exactly_one_state(self) -> None:
        s = self.q.stats()
        model = self.model.counts(self.now())
        real = {"ready": s.ready, "scheduled": s.scheduled, "in_flight": s.in_flight,
                "blocked": s.blocked, "dead": s.dead}
        assert sum(real.values()) == sum(model.values()) == len(self.model.messages)
        assert s.sent == self.model.sent
        if not self.model.expired_unseen:
            # Ended leases are settled by the next receive; until then only totals agree.
            assert real == model
            dead = sorted(d.id for d in self.q.dead_letters())
            assert dead == sorted(i for i, m in self.model.messages.items()
                                  if m.state == "dead")

    @invariant()
    def no_two_valid_leases(self) -> None:
        current = [(i, r) for i, r in self.receipts if self.model.current(i, r) is not None
                   and self.model.messages[i].state == "leased"]
        ids = [i for i, _ in current]
        assert len(ids) == len(set(ids)), "two receipts hold one message"


class SQLiteMachine(QueueMachine):
    @rule(priority=st.integers(0, 9), key=KEYS, delay=st.sampled_from([0, 0, 0, 3.0]),
          dedup=DEDUP)
    def send(self, priority: int, key: str | None, delay: float, dedup: str | None) -> None:
        self._send(priority, key, delay, dedup)

    @rule(dt=st.sampled_from([0.05, 1.0, 4.0, 11.0]))
    def time_passes(self, dt: float) -> None:
        assert self.clock is not None
        self.clock.now += dt
        self.model.advance(self.clock.now)


class PostgresMachine(QueueMachine):
    LEASE = 300.0

    @rule(priority=st.integers(0, 9), key=KEYS, dedup=DEDUP)
    def send(self, priority: int, key: str | None, dedup: str | None) -> None:
        self._send(priority, key, 0, dedup)


MODEL_SETTINGS = settings(max_examples=80, stateful_step_count=50, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture
def sqlite_broker(tmp_path: Path) -> Iterator[tuple[hailq.Broker, FakeClock]]:
    clock = FakeClock()
    with hailq.connect(f"sqlite:///{tmp_path / 'model.db'}?synchronous=off",
                       clock=clock) as broker:
        yield broker, clock


@pytest.mark.parametrize("aging", [None, 5.0], ids=["strict", "aging"])
def test_sqlite_queue_agrees_with_the_model(
        sqlite_broker: tuple[hailq.Broker, FakeClock], aging: float | None) -> None:
    broker, clock = sqlite_broker
    machine = type("Machine", (SQLiteMachine,), {"broker": broker, "clock": clock,
                                                 "AGING": aging})
    run_state_machine_as_test(machine, settings=MODEL_SETTINGS)


def test_postgres_queue_agrees_with_the_model(pg_url: str) -> None:
    with hailq.connect(pg_url) as broker:
        machine = type("Machine", (PostgresMachine,), {"broker": broker})
        run_state_machine_as_test(machine, settings=settings(MODEL_SETTINGS, max_examples=15))


def test_a_lease_ended_on_the_last_attempt_is_dead_without_any_further_receive(
        sqlite_broker: tuple[hailq.Broker, FakeClock]) -> None:
    """Rule 13: the poison killed its last consumer; the operator looks before anyone receives."""
    broker, clock = sqlite_broker
    q = broker.queue("last-attempt", lease=10, max_attempts=1)
    message_id = q.send({"poison": True})
    [m] = q.receive()
    assert m.attempt == 1
    clock.now += 11  # the consumer died with the lease; nobody receives any more
    assert [d.id for d in q.dead_letters()] == [message_id]
    stats = q.stats()
    assert (stats.dead, stats.in_flight) == (1, 0)
    assert q.redrive() == 1
