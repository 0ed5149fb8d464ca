"""Maintenance duties in the broker's database: a mixin of ``SqlBackend``.

Housekeeping that no rule's correctness waits for -- expired dedup records, figures'
slots past their retention, old autoscaler decisions, workers long silent -- is done
by one service every worker and ``hailq serve`` runs (``hailq/runtime/maintenance.py``).
Processes take turns through the ``maintenance`` table: ``maintenance_claim`` moves a
duty's ``next_due`` on in one short statement and answers whether this call took the
turn, so N workers do a duty once per interval, not N times. The lock is the row's,
for that statement's transaction only: no session lock, so PgBouncer's transaction
mode works (rule 31). A role that may only read (rule 30) fails at the claim, which
its service skips.

Each duty deletes in bounded batches, each its own short transaction, so a prune
never holds the writer for long; ``PRUNES`` names each duty's statements (another
store adds its own duty by adding a line here).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from hailq.backends.store import Store

if TYPE_CHECKING:
    from hailq.backends.dialect import Tx

# duty -> its statements; each takes :now, :limit, :keep and :before (= now - keep) and
# deletes at most :limit rows.
PRUNES: dict[str, tuple[str, ...]] = {
    "dedup": ("dedup_prune",),
    "figures": ("figures_prune_rates", "figures_prune_sketches", "figures_prune_ranges",
                "figures_prune_samples", "figures_prune_sends"),
    "autoscale": ("autoscale_prune",),
    "workers": ("worker_prune",),
}
LIMIT = 5000  # rows one statement deletes at most
ROUNDS = 20  # statements of one kind per turn; what is left waits for the next turn


@dataclass(frozen=True, slots=True)
class PruneParams:
    duty: str  # a key of PRUNES
    keep: float = 0.0  # seconds rows are kept, where the statement asks
    limit: int = LIMIT  # rows one statement deletes at most
    rounds: int = ROUNDS  # statements of one kind at most


@dataclass(frozen=True, slots=True)
class DeadlinePool:
    """The smallest pool that meets every target of a queue in deadline order (rule 41),
    before any autoscaler's saturation point: ``QueueFigures.deadline_pool``."""

    queue: str
    workers: int
    reason: str | None  # why no pool meets every target; None: one does


@dataclass(frozen=True, slots=True)
class Turn:
    """A duty's row in the maintenance table."""

    duty: str
    next_due: float  # broker clock
    ran_at: float
    ran_by: str
    runs: int


class UpkeepBackend(Protocol):
    """The maintenance part of the seam (``Backend`` has the rest)."""

    def maintenance_claim(self, duty: str, every: float) -> bool:
        """Take ``duty``'s turn if it is due (and make the next due ``every`` seconds
        on); False if another process has it. A write."""
        ...

    def maintenance_prune(self, params: PruneParams) -> int:
        """Run one duty's statements in bounded batches; how many rows went."""
        ...

    def maintenance_list(self) -> list[Turn]:
        """Every duty's row: who ran it last and how often. A read."""
        ...

    def deadline_pools_kept(self) -> bool:
        """Whether this storage keeps the pools of queues in deadline order for a reader
        in SQL (PostgreSQL's ``desired_workers`` view); the duty skips where not."""
        ...

    def deadline_pools_save(self, pools: Sequence[DeadlinePool]) -> None:
        """Store each queue's pool as ``Queue.figures()`` found it (rule 41). A write."""
        ...


class UpkeepStore(Store):
    """``maintenance_*`` of the Backend seam, over ``self.dialect``."""

    def maintenance_claim(self, duty: str, every: float) -> bool:
        args = {"duty": duty, "every": every, "by": f"{socket.gethostname()}:{os.getpid()}"}

        def claim(tx: Tx) -> bool:
            with tx.atomic():
                return tx.one("maintenance_claim", {**args, "now": tx.now}) is not None

        return self.dialect.work(claim, durable=False)

    def maintenance_prune(self, params: PruneParams) -> int:
        total = 0
        before = self.dialect.clock_now() - params.keep
        for name in PRUNES[params.duty]:
            for _ in range(params.rounds):
                deleted = self.dialect.work(
                    lambda tx, name=name: tx.exec(name, {  # type: ignore[misc]
                        "now": tx.now, "limit": params.limit, "keep": params.keep,
                        "before": before}),
                    durable=False)
                total += deleted
                if deleted < params.limit:
                    break
        return total

    def maintenance_list(self) -> list[Turn]:
        return [Turn(str(d), float(n), float(a), str(b), int(r))
                for d, n, a, b, r in self.dialect.read(
                    lambda tx: tx.run("maintenance_list", {}))]


    def deadline_pools_kept(self) -> bool:
        return self.dialect.flavor == "postgres"  # the only one with the view

    def deadline_pools_save(self, pools: Sequence[DeadlinePool]) -> None:
        if not pools:
            return
        args = {"queues": [p.queue for p in pools], "workers": [p.workers for p in pools],
                "reasons": [p.reason for p in pools]}
        self.dialect.work(lambda tx: tx.also("deadline_pool_save", args), durable=False)
