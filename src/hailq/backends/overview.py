"""Every queue at a glance (the dashboard's overview), the storage side: a part of ``SqlBackend``.

The figures of one queue (``figures_read``) count every message of it; a hundred
queues of ten thousand messages each made that a second. Here one statement reads
every queue, each count stopping at a limit (``overview_queues`` in each
``queries.sql``: a range of the state's partial index, so a million messages cost what
a few thousand do), and three more read every queue's stored figures. A count that
reached the limit is reported as such (``capped``), never as a number it is not.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from typing import Any

from hailq.backends.base_parts import DeadCountParams, OverviewParams, QueueGlanceRows
from hailq.backends.dialect import Tx
from hailq.backends.store import Part
from hailq.models import QueueRecord, QueueStats


class OverviewStore(Part):
    """``overview_read`` and ``dead_count`` of the Backend seam, over ``self.dialect``."""

    def overview_read(self, params: OverviewParams) -> list[QueueGlanceRows]:
        from hailq.backends.figure_rows import FigureRows, RangeRow, SketchRow
        from hailq.backends.figures import SHORT, points, rate_slot
        from hailq.policy.scaling import READY_READ

        cap = params.limit + 1

        def look(tx: Tx) -> list[QueueGlanceRows]:
            with tx.atomic():
                tx.also("overview_plan", {})
                return read(tx)

        def read(tx: Tx) -> list[QueueGlanceRows]:
            found = tx.run("overview_queues", {"cap": cap, "now": tx.now})
            if not found:
                return []
            now = float(found[0][-1])
            args = {"now": now, "short": SHORT}
            buckets: dict[str, list[Any]] = defaultdict(list)
            for q, kind, priority, le, n, total in tx.run("overview_histograms", args):
                buckets[str(q)].append((str(kind), int(priority), float(le), int(n),
                                        float(total)))
            rates: dict[str, list[Any]] = defaultdict(list)
            for r in tx.run("overview_rates", args):
                rates[str(r[0])].append(rate_slot(r[1:]))
            sketches: dict[str, list[Any]] = defaultdict(list)
            for q, kind, priority, b, n in tx.run("overview_sketches", args):
                sketches[str(q)].append(SketchRow(0, str(kind), int(priority), int(b), int(n)))
            ranges: dict[str, list[Any]] = defaultdict(list)
            for q, kind, priority, n, t, lo, hi in tx.run("overview_ranges", args):
                ranges[str(q)].append(RangeRow(0, str(kind), int(priority), int(n), float(t),
                                               float(lo), float(hi)))
            out = []
            for row in found:
                name = str(row[0])
                stats, capped = _stats(name, row, cap, now)
                # Deadline order (rule 41) sizes its pool from its first ready messages:
                # read for the queues whose settings may say so (the query checks).
                first = None
                if "deadline" in str(row[1]) + str(row[2] or ""):
                    first = [(int(p), float(a), k) for p, a, k in tx.run(
                        "figures_ready_first", {"queue": name, "n": READY_READ})]
                out.append(QueueGlanceRows(
                    QueueRecord(name, str(row[1]), None if row[2] is None else str(row[2]),
                                bool(row[3])),
                    FigureRows(stats=stats, now=now, buckets=buckets[name],
                               rates=rates[name], sketches=sketches[name],
                               ranges=ranges[name], points=points(tx, name, now),
                               created_at=float(row[-3]), acked=int(row[-2]),
                               ready_first=first),
                    capped))
            return out

        return self.dialect.read(look)

    def dead_count(self, params: DeadCountParams) -> int:
        args = {"queue": params.queue, "error": params.error_contains,
                "older_than": params.older_than, "ordering_key": params.ordering_key,
                "cap": params.limit + 1}
        return int(self.dialect.read(
            lambda tx: tx.one("overview_dead_count", {**args, "now": tx.now}))[0])


def _stats(name: str, row: Any, cap: int, now: float) -> tuple[QueueStats, frozenset[str]]:
    """The counts of one ``overview_queues`` row as ``queue_stats`` combines them (due
    delays ready, ended leases ready or dead), with the names of those that reached
    ``cap``: those read as the limit (``cap - 1``), meaning "more than that"."""
    ready, scheduled, due, leased, ended, killed, blocked, dead = (int(v) for v in row[4:12])
    oldest, sent, dead_lettered = row[12], int(row[13]), int(row[14])
    capped = set()
    if cap in (ready, due, ended):
        capped.add("ready")
    if cap in (scheduled, due):
        capped.add("scheduled")
    if cap in (leased, ended):
        capped.add("in_flight")
    if blocked == cap:
        capped.add("blocked")
    if cap in (dead, killed):
        capped.add("dead")
    stats = QueueStats(
        queue=name, ready=ready + due + ended - killed, scheduled=max(scheduled - due, 0),
        in_flight=max(leased - ended, 0), blocked=blocked, dead=dead + killed,
        oldest_ready_age=None if oldest is None else max(now - float(oldest), 0.0),
        sent=sent, acked=0, nacked=0, redelivered=0, dead_lettered=dead_lettered + killed,
        late_acks=0, paused=bool(row[3]))
    if capped:
        limit = cap - 1
        limits: dict[str, Any] = {name: limit for name in capped}
        stats = replace(stats, **limits)
    return stats, frozenset(capped)
