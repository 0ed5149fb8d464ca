"""The runtime's door into storage, kept off ``Broker`` so that ``Broker`` is the user's API.

What a worker, a scheduler, an autoscaler, ``hailq serve`` and the command line need
beyond what a user's code calls (a heartbeat row, a scheduler's slots, a maintenance
turn) goes through ``ops(broker)``: a thin face of the same broker, on the same
backend, its clock and its figures. Nothing here is public API: names may change
in any release. See docs/contributing.md ("The user's API and the runtime's").
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from hailq.backends.base import (
    QueueDescribeParams,
    ScheduleDeclareParams,
)
from hailq.settings import QueueSettings, parse_overrides

if TYPE_CHECKING:
    from hailq.broker import Broker
    from hailq.models import AutoscalerInfo, ScheduleInfo, WorkerInfo
    from hailq.queue import Queue
    from hailq.schedule import Periodic


class RuntimeOps:
    """What the runtime and the command line do to ``broker``'s database besides the
    user's API. Cheap to build: it holds the broker and nothing else."""

    __slots__ = ("broker",)

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def refresh(self, queues: Iterable[Queue]) -> list[str]:
        """Lay each queue's effective settings as stored now over ``queues`` (a worker's:
        it times its lease renewals and figures by them, rule 39), one read for all;
        return the names of those whose lease changed."""
        by_name = {q.name: q for q in queues}
        changed = []
        backend = self.broker.backend
        for record in backend.queue_describe(QueueDescribeParams(list(by_name))):
            queue = by_name[record.name]
            overrides = parse_overrides(record.overrides)
            settings = QueueSettings.from_json(record.declared).overlay(overrides)
            if settings.lease != queue.settings.lease:
                changed.append(record.name)
            queue.settings, queue.overrides = settings, overrides
        return changed

    def save_worker(self, worker: WorkerInfo) -> None:
        """Record a worker's heartbeat (``last_seen`` is set to the broker's clock)."""
        self.broker.backend.worker_save(worker)

    def record_autoscale(self, decision: AutoscalerInfo) -> None:
        """Store one decision of an autoscaler (its ``at`` is set to the broker's clock)."""
        self.broker.backend.autoscale_record(decision)

    def declare_schedules(self, periodics: Sequence[Periodic], now: float) -> None:
        """Store an app's schedules as a scheduler starts (new ones with ``now`` as their
        last slot; existing ones keep theirs) and declare their queues."""
        for p in periodics:
            self.broker.queue(p.queue)
            self.broker.backend.schedule_save(p.save_params("app", now))

    def keep_schedules_declared(self, names: Sequence[str], now: float) -> None:
        """A running scheduler still declares these (see docs/guides/periodic.md)."""
        self.broker.backend.schedule_declare(ScheduleDeclareParams(names, now))

    def send_slots(self, schedule: ScheduleInfo, slots: Sequence[float], now: float) -> bool:
        """Send one message per slot of ``schedule`` (oldest first) and move its last slot
        to the newest, in one transaction, only if its last slot is still the one it was
        read with: False (nothing sent) if another scheduler sent them first, or it was
        paused or removed meanwhile."""
        from hailq.schedule import fire_params

        if not slots:
            return False
        self.broker.queue(schedule.queue)  # declared: its row's aging and targets key the slots
        return self.broker.backend.schedule_fire(fire_params(schedule, slots, now))

    def record_levels(self) -> bool:
        """Record every queue's levels for the current 10 s slot unless some process did
        already, and forget those past the hour; True if this call wrote them. The duty
        of every worker and ``hailq serve`` (hailq/runtime/levels.py)."""
        from hailq.backends.base import LevelsRecordParams

        return self.broker.backend.levels_record(LevelsRecordParams())

    def take_maintenance_turn(self, duty: str, every: float) -> bool:
        """Take maintenance ``duty``'s turn if it is due, making the next due ``every``
        seconds on; False if another process has it (hailq/runtime/maintenance.py)."""
        from hailq.backends.base_parts import MaintenanceClaimParams

        return self.broker.backend.maintenance_claim(MaintenanceClaimParams(duty, every))

    def prune(self, duty: str, keep: float = 0.0) -> int:
        """Run one maintenance duty's deletes in bounded batches; how many rows went."""
        from hailq.backends.base_parts import PruneParams

        return self.broker.backend.maintenance_prune(PruneParams(duty, keep))

    def prune_history(self, rounds: int = 20) -> int:
        """Delete each retaining queue's history rows finished longer ago than its
        retention (rule 40): batches of one short transaction each, at most ``rounds``
        per queue (what is left waits for the next turn); how many rows went."""
        from hailq.backends.base_parts import PRUNE_BATCH, HistoryPruneParams, HistorySettleParams

        # What acks wrote unindexed goes in first (SQLite): pruned where it is kept.
        settle = HistorySettleParams()
        for _ in range(rounds * 10):
            if self.broker.backend.history_settle(settle) < settle.batch:
                break
        total = 0
        for queue in self.broker.queues():
            if queue.settings.retain is None:
                continue
            for _ in range(rounds):
                gone = self.broker.backend.history_prune(
                    HistoryPruneParams(queue.name, queue.settings.retain))
                total += gone
                if gone < PRUNE_BATCH:
                    break
        return total

    def store_deadline_pools(self) -> int:
        """Store the pool of each queue in deadline order as its figures find it, for
        PostgreSQL's ``desired_workers`` view (rule 41, migration 16); how many. Nothing
        where the storage keeps none (SQLite has no such view). A maintenance duty."""
        from hailq.backends.base_parts import DeadlinePool, DeadlinePoolsParams

        backend = self.broker.backend
        if not backend.deadline_pools_kept():
            return 0
        pools = [DeadlinePool(q.name, f.deadline_pool, f.desired_workers_reason)
                 for q in self.broker.queues() if q.settings.order == "deadline"
                 for f in [q.figures()] if f.deadline_pool is not None]
        backend.deadline_pools_save(DeadlinePoolsParams(pools))
        return len(pools)


def ops(broker: Broker) -> RuntimeOps:
    """The runtime's face of ``broker`` (see the module's docstring)."""
    return RuntimeOps(broker)
