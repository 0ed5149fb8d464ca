"""Every queue at a glance: what the dashboard's overview shows of each queue (rule 25),
built from one snapshot of all of them (``Broker.overview``).

Counts stop at a limit (``hailq/backends/overview.py``): a count that reached it is
named in ``capped`` and reads "more than ``limit``". Rates, per-priority waits,
service-level breaches and ``desired_workers`` are those of ``Queue.figures``.
"""

from __future__ import annotations

from dataclasses import dataclass

from hailq.backends.base import QueueGlanceRows
from hailq.models import WorkerInfo
from hailq.observe.figures import QueueFigures, build
from hailq.settings import QueueSettings, parse_overrides

DEFAULT_LIMIT = 10_000
"""Counts past this many are shown as "10,000+" (and cost no more to count)."""


@dataclass(frozen=True)
class QueueGlance:
    """One queue of the overview: its figures (counts capped at ``limit``), which of its
    counts went past the limit, and which settings an operator overrode."""

    figures: QueueFigures
    capped: frozenset[str]
    limit: int
    overridden: tuple[str, ...]

    @property
    def name(self) -> str:
        return self.figures.queue

    @property
    def breaches_5m(self) -> int:
        """Service-level breaches over the last five minutes, every priority."""
        return sum(p.breaches_5m for p in self.figures.priorities)


def glances(found: list[QueueGlanceRows], workers: list[WorkerInfo],
            limit: int) -> list[QueueGlance]:
    """The overview's queues, from the rows ``overview_read`` returned."""
    out = []
    for g in found:
        overrides = parse_overrides(g.record.overrides)
        settings = QueueSettings.from_json(g.record.declared).overlay(overrides)
        out.append(QueueGlance(build(g.rows, settings, workers), g.capped, limit,
                               tuple(sorted(overrides))))
    return out
