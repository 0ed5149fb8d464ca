"""Figures per queue (rule 25) in the broker's database: the storage half.

Workers measure wait and handler time in memory and flush once a second
(``hailq/observe/recorder.py``); this mixin of ``SqlBackend`` writes such a
batch in one short transaction, and reads a queue's figures in the same
snapshot as its stats. Nothing here runs per message.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from hailq.backends import rows
from hailq.backends.base import FigureRows, FiguresRecordParams
from hailq.errors import QueueNotFound

if TYPE_CHECKING:
    from hailq.backends.dialect import Dialect, Tx


def _json_rows(rows: Iterable[dict[str, Any]]) -> str:
    """Rows for one statement, as the JSON array both dialects read (no NaN, no inf)."""
    return json.dumps(list(rows), allow_nan=False)


class FiguresStore:
    """``figures_record`` and ``figures_read`` of the Backend seam, over ``self.dialect``."""

    dialect: Dialect

    def figures_record(self, params: FiguresRecordParams) -> None:
        def record(tx: Tx) -> None:
            now = tx.now
            with tx.atomic():
                # One statement each, rows in key order: workers flushing at once hold
                # the shared rows briefly and take them in the same order.
                if params.buckets:
                    tx.exec("figures_histogram_add", {"rows": _json_rows(
                        {**b._asdict(), "le": None if math.isinf(b.le) else b.le}
                        for b in sorted(params.buckets)), "now": now})
                if params.rates:
                    tx.exec("figures_rate_add", {"rows": _json_rows(
                        r._asdict() for r in sorted(params.rates)), "now": now})
                for queue in params.sampled:
                    tx.exec("figures_sample", {"queue": queue, "now": now})
                if params.prune:
                    tx.exec("figures_prune_rates", {"now": now})
                    tx.exec("figures_prune_samples", {"now": now})

        self.dialect.work(record, durable=False)

    def figures_read(self, queue: str) -> FigureRows:
        def look(tx: Tx) -> FigureRows:
            live = tx.one("queue_live", {"queue": queue})  # its pause, and that it exists
            if live is None:
                raise QueueNotFound(f"no queue named {queue!r} (never declared, or "
                                    "deleted); declare it with broker.queue()")
            row = tx.one("stats", {"queue": queue, "now": tx.now})  # its clock comes last
            now = float(row[-1])
            parked = [r[0] for r in tx.run("stats_parked", {"queue": queue, "now": tx.now})]
            args: dict[str, Any] = {"queue": queue, "now": now}
            return FigureRows(
                stats=rows.stats(queue, row[:-1], now, parked, bool(live[4])), now=now,
                buckets=[(str(k), int(p), float(le), int(n), float(t))
                         for k, p, le, n, t in tx.run("figures_histograms", args)],
                rates=[(int(s), int(p), int(a), int(b), int(c), int(d), float(e))
                       for s, p, a, b, c, d, e in tx.run("figures_rates", args)],
                samples=[(float(at), int(sent), int(dead))
                         for at, sent, dead in tx.run("figures_samples", args)])

        return self.dialect.read(look)
