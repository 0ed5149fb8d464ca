"""``hailq autoscale`` on a queue in deadline order (rules 24 and 41) on both backends: its
target is the smallest pool that meets every target, as the queue's figures compute it
from the database, and a saturation point still stops it below. The loop's own tick
runs against the real database; only its worker processes are pretended (a count), so
the test is about the target, not about starting processes."""

from __future__ import annotations

import itertools
from typing import Any

import hailq
from conformance.helpers import RawDatabase
from hailq.backends.base import FiguresRecordParams, RateAdd
from hailq.policy.autoscale import Limits, State
from hailq.runtime.autoscaler import Autoscaler
from hailq.runtime.supervisor import WorkerSpec

SLO = {9: 10, 5: 60, 0: 3600}


def settle(raw: RawDatabase, broker: hailq.Broker, queue: str) -> None:
    """20 handler runs of 1 s measured; the queue made two hours ago and its backlog sent
    then: no arrival rate, only the backlog (as tests/conformance/test_rules_deadline_pool)."""
    broker.backend.figures_record(FiguresRecordParams(
        rates=[RateAdd(queue=queue, priority=5, started=20, acked=20, handler_total=20.0)],
        sampled=[]))
    table = raw.table("hailq_queues" if raw.is_sqlite else "queues")
    raw.execute(f"UPDATE {table} SET created_at = created_at - 7200 WHERE name = ?", (queue,))
    sends = raw.table("hailq_sends" if raw.is_sqlite else "sends")
    raw.execute(f"UPDATE {sends} SET slot = slot - 720 WHERE queue = ?", (queue,))


class Pretend(Autoscaler):
    """The autoscaler's loop with a count for its worker processes."""

    size = 1

    def _live(self) -> list[Any]:
        return [None] * self.size

    def _resize(self, wanted: int) -> None:
        self.size = wanted


def test_rule_41_autoscale_targets_the_smallest_pool_and_stops_at_a_saturation_point(
        broker: hailq.Broker, backend_name: str, url: str) -> None:
    raw = RawDatabase(backend_name, url)
    q = broker.queue("claims", slo=SLO, order="deadline")
    strict = broker.queue("strict", slo=SLO)
    for queue in (q, strict):  # 600 runs of 1 s, each due within 60 s
        queue.send_many([hailq.Envelope(n, priority=5) for n in range(600)])
        settle(raw, broker, queue.name)
    needed = q.figures().desired_workers
    assert 10 <= needed <= 12 and q.figures().deadline_pool == needed
    # In priority order the backlog is drained within the tightest target instead.
    assert strict.figures().desired_workers == 60 and strict.figures().deadline_pool is None

    ticks = itertools.count(0.0, 5.0)
    scaler = Pretend(broker, WorkerSpec(url=url, target="autoscale_handlers:sleepy"),
                     "claims", Limits(1, 40), clock=lambda: next(ticks))
    scaler._settled_since = -1.0
    scaler._tick()  # the first window starts
    scaler._tick()
    (last,) = broker.autoscalers("claims")
    # The deadlines draw nearer as the test runs: a slow machine may need one more.
    assert (last.decision, last.workers) == ("grow", 2) and needed <= last.desired <= needed + 1
    needed = last.desired
    assert f"{needed} meet every deadline target (backlog 600)" in last.reason

    # A saturation point at 3 (a downstream that serves no more) holds the pool there.
    scaler.size, scaler._state = 3, State(ceiling=3)
    scaler._tick()
    (last,) = broker.autoscalers("claims")
    assert (last.decision, last.workers, last.desired, last.ceiling) == ("hold", 3, 3, 3)
    assert f"{needed} meet every deadline target (backlog 600), at the saturation " \
        "point 3" in last.reason
    figures = q.figures()  # the recorded point caps the figure; the target stays
    assert figures.desired_workers == 3 and needed <= (figures.deadline_pool or 0) <= needed + 1
    shown = broker.autoscale_decisions("claims", 1)[0]
    assert shown.reason == last.reason
