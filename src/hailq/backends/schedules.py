"""Periodic schedules (SPEC rule 35), the storage side: a part of ``SqlBackend`` (the
seam's part, ``ScheduleBackend``, is in ``base_parts.py``).

A schedule is one row per name with what it sends and the last slot sent. A scheduler
sends due slots with ``schedule_fire``: one transaction moves ``last_slot`` from the
value the scheduler saw to the newest slot it sends, and inserts the slots' messages.
Only one scheduler can move it from that value, so each slot is sent once however many
schedulers run (not by a dedup id, whose window may be shorter than the period), and a
scheduler that dies before its commit leaves the slot to the next one.
"""

from __future__ import annotations

from typing import Any

from hailq.backends.base_parts import (
    ScheduleDeclareParams,
    ScheduleDeleteParams,
    ScheduleFireParams,
    SchedulePauseParams,
    ScheduleRow,
    ScheduleSaveParams,
)
from hailq.backends.dialect import Tx
from hailq.backends.store import Part


class ScheduleStore(Part):
    """``ScheduleBackend`` over a SQL dialect (a part of ``SqlBackend``)."""

    def schedule_save(self, params: ScheduleSaveParams) -> None:
        args = {"name": params.name, "queue": params.queue, "cron": params.cron,
                "every": params.every, "timezone": params.timezone,
                "catch_up": params.catch_up, "body": params.body,
                "body_kind": params.body_kind, "headers": params.headers,
                "priority": params.priority, "source": params.source, "now": params.now}
        self.dialect.work(lambda tx: tx.exec("schedule_save", args), durable=True)

    def schedule_declare(self, params: ScheduleDeclareParams) -> None:
        if params.names:
            self.dialect.work(lambda tx: tx.exec("schedule_declare", {
                "names": list(params.names), "now": params.now}), durable=False)

    def schedule_list(self) -> list[ScheduleRow]:
        found = self.dialect.read(lambda tx: tx.run("schedule_list", {}))
        return [_row(r) for r in found]

    def schedule_fire(self, params: ScheduleFireParams) -> bool:
        def fire(tx: Tx) -> bool:
            with tx.atomic():
                if not tx.exec("schedule_fire", {
                        "name": params.name, "seen": params.seen, "slot": params.slot,
                        "now": params.now, "n": len(params.messages)}):
                    return False
                if params.messages:
                    self.dialect.insert(tx, params.messages)
                return True

        # A re-run after a lost connection finds last_slot moved if the first try
        # committed, and sends nothing again.
        return self.dialect.work(fire, durable=True, rerun=fire)

    def schedule_pause(self, params: SchedulePauseParams) -> bool:
        return bool(self.dialect.work(lambda tx: tx.exec("schedule_pause", {
            "name": params.name, "paused": params.paused, "now": params.now}), durable=True))

    def schedule_delete(self, params: ScheduleDeleteParams) -> bool:
        return bool(self.dialect.work(lambda tx: tx.exec("schedule_delete", {
            "name": params.name}), durable=True))


def _row(r: Any) -> ScheduleRow:
    (name, queue, cron, every, tz, catch_up, body, body_kind, headers, priority, source,
     paused, created_at, declared_at, last_slot, fired_at, fired) = r
    return ScheduleRow(str(name), str(queue), cron, None if every is None else float(every),
                       str(tz), int(catch_up), bytes(body), int(body_kind), headers,
                       int(priority), str(source), bool(paused), float(created_at),
                       float(declared_at), float(last_slot),
                       None if fired_at is None else float(fired_at), int(fired))

