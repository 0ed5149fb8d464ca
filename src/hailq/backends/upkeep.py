"""Maintenance duties in the broker's database: a part of ``SqlBackend``.

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
from typing import TYPE_CHECKING

from hailq.backends.base_parts import (
    DeadlinePoolsParams,
    MaintenanceClaimParams,
    PruneParams,
    Turn,
)
from hailq.backends.store import Part

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
class UpkeepStore(Part):
    """``maintenance_*`` of the Backend seam, over ``self.dialect``."""

    def maintenance_claim(self, params: MaintenanceClaimParams) -> bool:
        args = {"duty": params.duty, "every": params.every,
                "by": f"{socket.gethostname()}:{os.getpid()}"}

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

    def deadline_pools_save(self, params: DeadlinePoolsParams) -> None:
        pools = params.pools
        if not pools:
            return
        args = {"queues": [p.queue for p in pools], "workers": [p.workers for p in pools],
                "reasons": [p.reason for p in pools]}
        self.dialect.work(lambda tx: tx.also("deadline_pool_save", args), durable=False)
