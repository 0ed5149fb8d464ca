"""Figures per queue (rule 25) in the broker's database: the storage half.

Every process's broker counts waits at claims and handler times at acks in
memory and flushes once a second (``hailq/observe/recorder.py``); this part of
``SqlBackend`` writes such a batch in one short transaction (the maintenance service
prunes by age: ``hailq/backends/upkeep.py``), and reads a queue's figures in the same
snapshot as its stats. Nothing here runs per message.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import asdict
from typing import Any

from hailq.backends import rows
from hailq.backends.dialect import Tx
from hailq.backends.figure_rows import (
    FigureRows,
    FiguresReadParams,
    FiguresRecordParams,
    FiguresWindowParams,
    Point,
    RangeRow,
    RateSlot,
    SketchRow,
)
from hailq.backends.operators import _no_queue
from hailq.backends.store import Part
from hailq.policy.scaling import READY_READ


def _json_rows(rows: Iterable[dict[str, Any]]) -> str:
    """Rows for one statement, as the JSON array both dialects read (no NaN, no inf)."""
    return json.dumps(list(rows), allow_nan=False)


SLOT = 10.0  # seconds per stored slot of rates and sketches (queries.sql)
SHORT, LONG = 300.0, 3600.0  # the percentiles' windows (hailq/observe/figures.py)
RATE_WINDOWS = (60.0, 300.0, 3600.0)  # the rates' windows


def rate_slot(row: Any) -> RateSlot:
    """A stored rate row (slot number first) as the seam returns it."""
    slot, p, started, acked, failed, breaches, handler, redelivered, inbox, late = row
    return RateSlot(slot=int(slot) * SLOT, priority=int(p), started=int(started),
                    acked=int(acked), failed=int(failed), breaches=int(breaches),
                    handler_total=float(handler), redelivered=int(redelivered),
                    inbox=int(inbox), late_acks=int(late))


class FiguresStore(Part):
    """``figures_record``, ``figures_read`` and ``figures_window`` of the Backend seam,
    over ``self.dialect``."""

    def figures_record(self, params: FiguresRecordParams) -> None:
        def record(tx: Tx) -> None:
            now = tx.now
            with tx.atomic():
                # One statement each, rows in key order: processes flushing at once hold
                # the shared rows briefly and take them in the same order.
                if params.buckets:
                    tx.exec("figures_histogram_add", {"rows": _json_rows(
                        {**b._asdict(), "le": None if math.isinf(b.le) else b.le}
                        for b in sorted(params.buckets)), "now": now})
                if params.rates:
                    tx.exec("figures_rate_add", {"rows": _json_rows(asdict(r) for r in sorted(
                        params.rates, key=lambda r: (r.queue, r.priority))), "now": now})
                    acked: dict[str, int] = {}
                    for r in params.rates:
                        acked[r.queue] = acked.get(r.queue, 0) + r.acked
                    if any(acked.values()):
                        tx.exec("figures_count_acked", {"rows": _json_rows(
                            {"queue": q, "n": n} for q, n in sorted(acked.items()) if n),
                            "now": now})
                if params.sketches:
                    tx.exec("figures_sketch_add", {"rows": _json_rows(
                        k._asdict() for k in sorted(params.sketches)), "now": now})
                if params.ranges:
                    tx.exec("figures_range_add", {"rows": _json_rows(
                        g._asdict() for g in sorted(params.ranges)), "now": now})
                for queue in sorted(params.sampled):
                    tx.exec("figures_sample", {"queue": queue, "now": now})

        with self.dialect.briefly():  # housekeeping gives way to a user's call
            self.dialect.work(record, durable=False)

    def figures_read(self, params: FiguresReadParams) -> FigureRows:
        queue = params.queue

        def look(tx: Tx) -> FigureRows:
            live = tx.one("queue_live", {"queue": queue})  # its pause, and that it exists
            if live is None:
                raise _no_queue(queue)
            row = tx.one("stats", {"queue": queue, "now": tx.now})  # its clock comes last
            now = float(row[-1])
            parked = [r[0] for r in tx.run("stats_parked", {"queue": queue, "now": tx.now})]
            args: dict[str, Any] = {"queue": queue, "now": now, "short": SHORT, "long": LONG}
            made = tx.one("figures_queue", {"queue": queue})
            return FigureRows(
                stats=rows.stats(queue, row[:-1], now, parked, bool(live[4])), now=now,
                buckets=[(str(k), int(p), float(le), int(n), float(t))
                         for k, p, le, n, t in tx.run("figures_histograms", args)],
                rates=[rate_slot(r) for r in tx.run("figures_rates", args)],
                sketches=[SketchRow(int(w), str(k), int(p), int(b), int(n))
                          for w, k, p, b, n in tx.run("figures_sketches", args)],
                ranges=[RangeRow(int(w), str(k), int(p), int(n), float(t), float(lo),
                                 float(hi))
                        for w, k, p, n, t, lo, hi in tx.run("figures_ranges", args)],
                points=points(tx, queue, now),
                created_at=None if made is None else float(made[0]),
                acked=0 if made is None else int(made[1]),
                ready_first=[(int(p), float(a), k) for p, a, k in tx.run(
                    "figures_ready_first", {"queue": queue, "n": READY_READ})],
                sends=[(int(slot) * SLOT, int(p), int(n))
                       for slot, p, n in tx.run("figures_sends", args)])

        return self.dialect.read(look)

    def figures_window(self, params: FiguresWindowParams) -> list[RateSlot]:
        def look(tx: Tx) -> list[RateSlot]:
            if tx.one("queue_live", {"queue": params.queue}) is None:
                raise _no_queue(params.queue)
            return [rate_slot(r) for r in tx.run("figures_window", {
                "queue": params.queue, "since": float(params.since)})]

        return self.dialect.read(look)


def points(tx: Tx, queue: str, now: float) -> list[Point]:
    """The counter samples each rate window starts from (``figures_points``)."""
    w0, w1, w2 = RATE_WINDOWS
    return [Point(float(w), int(after), float(at), int(sent), int(dead), int(acked))
            for w, after, at, sent, dead, acked in tx.run(
                "figures_points", {"queue": queue, "now": now, "w0": w0, "w1": w1,
                                   "w2": w2})]
