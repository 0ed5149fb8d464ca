"""Queue levels over time (the dashboard's charts, rule 25): a part of ``SqlBackend``.

Ready, in-flight, delayed, blocked and dead counts are a snapshot; to draw them over
time they are recorded once per ``SLOT`` seconds per queue, with the queue's ``sent``
and ``acked`` counters beside them (their differences are the throughput). Every worker
and ``hailq serve`` runs a small duty that calls ``levels_record`` each slot
(``hailq/runtime/levels.py``); the first process to come in a slot counts and writes,
the others find the slot taken and count nothing. Two that count at once both insert
with ``ON CONFLICT (queue, slot) DO NOTHING``: the first row stays, one row per queue
and slot whatever the number of processes, with no lock held across statements (so
PgBouncer's transaction mode works). Rows older than ``KEEP`` seconds are pruned by the
same write. The counting is a read, the write a short transaction of its own: a role
that may only read (rule 30) fails at the write, which its duty skips.
"""

from __future__ import annotations

import json
import math
from typing import Any

from hailq.backends.base_parts import SLOT, LevelRow, LevelsReadParams, LevelsRecordParams
from hailq.backends.dialect import Tx
from hailq.backends.store import Part


class LevelsStore(Part):
    """``levels_record`` and ``levels_read`` of the Backend seam, over ``self.dialect``."""

    def levels_record(self, params: LevelsRecordParams) -> bool:
        cap = params.limit + 1

        def count(tx: Tx) -> tuple[float, list[Any]]:
            with tx.atomic():
                now = float(tx.one("levels_now", {"now": tx.now})[0])
                if tx.one("levels_taken", {"slot": _slot(now)}) is not None:
                    return now, []  # another process recorded this slot
                # The overview's counts (each a range of its state's index, stopping
                # at the cap) and counters: one statement counts for both.
                return now, tx.run("overview_queues", {"cap": cap, "now": now})

        now, found = self.dialect.read(count)
        if not found:
            return False
        rows = json.dumps([_levels(row, cap) for row in found], allow_nan=False)
        slot = _slot(now)

        def write(tx: Tx) -> int:
            with tx.atomic():
                added = tx.exec("levels_add", {"rows": rows, "slot": slot, "at": now})
                tx.exec("levels_prune", {"slot": slot - math.ceil(params.keep / SLOT)})
                return added

        return self.dialect.work(write, durable=False) > 0

    def levels_read(self, params: LevelsReadParams) -> list[LevelRow]:
        args = {"queue": params.queue, "slot": _slot(params.since)}
        found = self.dialect.read(lambda tx: tx.run("levels_read", args))
        return [LevelRow(str(q), float(at), int(r), int(f), int(d), int(b), int(x), int(s),
                         None if a is None else int(a), bool(c))
                for q, at, r, f, d, b, x, s, a, c in found]


def _slot(at: float) -> int:
    return math.floor(at / SLOT)


def _levels(row: Any, cap: int) -> dict[str, Any]:
    """One ``overview_queues`` row as the levels a chart reads, counted as ``stats`` counts
    them (due delays ready, ended leases ready again or, after the last attempt, dead)."""
    name, sent, purged = row[0], row[13], row[15]
    ready, scheduled, due, leased, ended, killed, blocked, dead = (int(v) for v in row[4:12])
    raw = (ready, scheduled, due, leased, ended, killed, blocked, dead)
    capped = cap in raw
    present = ready + scheduled + leased + blocked + dead
    limit = cap - 1
    return {"queue": str(name), "ready": min(ready + due + ended - killed, limit),
            "in_flight": min(max(leased - ended, 0), limit),
            "delayed": min(max(scheduled - due, 0), limit), "blocked": min(blocked, limit),
            "dead": min(dead + killed, limit), "sent": int(sent),
            "acked": None if capped else max(int(sent) - present - int(purged), 0),
            "capped": capped}
