"""Rule 41: ``desired_workers`` of a queue in deadline order on both backends: the
smallest pool that meets every target for the ready messages read from the database,
or the largest useful one with the reason (figures, ``hailq stats --json``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import hailq
from hailq.backends.base import FiguresRecordParams, PruneParams, RateAdd
from waiting import clear_of_slot_end

from .helpers import RawDatabase

SLO = {9: 10, 5: 60, 0: 3600}


def settle(raw: RawDatabase, broker: hailq.Broker, queue: str, handled: int) -> None:
    """``handled`` runs of 1 s measured, and the queue made two hours ago with nothing
    sent since its counters were sampled: no arrival rate, only the backlog."""
    broker.backend.figures_record(FiguresRecordParams(
        rates=[RateAdd(queue=queue, priority=5, started=handled, acked=handled,
                       handler_total=float(handled))], sampled=[]))
    table = raw.table("hailq_queues" if raw.is_sqlite else "queues")
    raw.execute(f"UPDATE {table} SET created_at = created_at - 7200 WHERE name = ?", (queue,))
    sends = raw.table("hailq_sends" if raw.is_sqlite else "sends")  # sent two hours ago
    raw.execute(f"UPDATE {sends} SET slot = slot - 720 WHERE queue = ?", (queue,))


def test_rule_41_desired_workers_is_the_smallest_pool_that_meets_every_target(
        broker: hailq.Broker, raw: RawDatabase, url: str) -> None:
    q = broker.queue("claims", slo=SLO, order="deadline")
    strict = broker.queue("strict", slo=SLO)
    for queue in (q, strict):
        queue.send_many([hailq.Envelope(n, priority=5) for n in range(100)])
        settle(raw, broker, queue.name, 20)

    figures = q.figures()
    # 100 runs of 1 s due within 60 s: two slots start the last one at 49 s.
    assert (figures.desired_workers, figures.desired_workers_reason) == (2, None)
    glances = {g.name: g for g in broker.overview()}  # the dashboard's overview
    assert glances["claims"].figures.desired_workers == 2
    assert glances["strict"].figures.desired_workers == 10
    # Priority order drains the backlog within the tightest target instead.
    assert strict.figures().desired_workers == 10


def test_rule_41_a_late_message_names_the_largest_useful_pool_and_why(
        broker: hailq.Broker, raw: RawDatabase, url: str) -> None:
    q = broker.queue("claims", slo=SLO, order="deadline")
    q.send_many([hailq.Envelope(n, priority=5) for n in range(100)])
    q.send("late", priority=9)
    table = raw.table("hailq_messages" if raw.is_sqlite else "messages")
    raw.execute(f"UPDATE {table} SET available_at = available_at - 100, "
                "sort_key = sort_key - 100 WHERE priority = 9")
    settle(raw, broker, "claims", 20)

    figures = q.figures()
    assert figures.desired_workers_reason is not None
    assert figures.desired_workers_reason.startswith("late: 1 ready message(s)")
    assert figures.desired_workers >= 2

    env = {k: v for k, v in os.environ.items() if k != "HAILQ_URL"}
    shown = subprocess.run([sys.executable, "-m", "hailq.cli.main", "stats", "claims",
                            "--json", "--url", url], capture_output=True, text=True,
                           env=env, timeout=120, stdin=subprocess.DEVNULL)
    assert shown.returncode == 0, shown.stderr
    (record,) = json.loads(shown.stdout)["queues"]
    assert record["desired_workers"] == figures.desired_workers
    assert record["desired_workers_reason"].startswith("late: 1 ")


def test_rule_41_the_doctor_names_a_deadline_queue_whose_pool_is_too_small(
        broker: hailq.Broker, raw: RawDatabase) -> None:
    from hailq.doctor import examine

    q = broker.queue("claims", slo=SLO, order="deadline")
    strict = broker.queue("strict", slo=SLO)
    for queue in (q, strict):
        queue.send_many([hailq.Envelope(n, priority=5) for n in range(100)])
        settle(raw, broker, queue.name, 20)

    found = {d.queue: d for d in examine(broker)}
    (finding,) = [f for f in found["claims"].findings if f.kind == "pool_too_small"]
    assert finding.evidence["needed"] == 2 and finding.evidence["workers"] == 0
    assert finding.evidence["reason"] is None
    assert "--min 2" in finding.snippets[0].code
    assert not [f for f in found["strict"].findings if f.kind == "pool_too_small"]


def test_rule_41_sends_record_each_priority_s_arrival_rate_and_it_sizes_the_pool(
        broker: hailq.Broker, raw: RawDatabase) -> None:
    """Each send counts its messages per priority and 10-second slot: the figures show
    each priority's arrival rate, and the pool of a deadline queue is sized by it. The
    same backlog asks for more workers when urgent work keeps arriving than when the
    arrivals can wait."""
    clear_of_slot_end(6.0)  # both queues' reads see windows of the same length
    queues = {}
    for name, arriving in (("urgent", 9), ("bulk", 0)):
        q = queues[name] = broker.queue(name, slo=SLO, order="deadline")
        q.send_many([hailq.Envelope(n, priority=arriving) for n in range(90)])
        q.send_many([hailq.Envelope(n, priority=arriving) for n in range(30)])
        while batch := q.receive(100):  # the arrivals are handled, the backlog waits
            q.ack_many(batch)
        q.send_many([hailq.Envelope(n, priority=5) for n in range(100)])
        settle(raw, broker, name, 20)  # the backlog was sent two hours ago
        sends = raw.table("hailq_sends" if raw.is_sqlite else "sends")
        raw.execute(f"UPDATE {sends} SET slot = slot + 720 WHERE queue = ? AND priority "
                    "<> 5", (name,))  # the arrivals in the last minute

    urgent, bulk = queues["urgent"].figures(), queues["bulk"].figures()
    rate = {p.priority: p.sent_per_second_1m for p in urgent.priorities}
    # Over the last minute's slots: at least a minute, at most a minute and a slot.
    assert 120 / 70 <= rate[9] <= 120 / 60
    assert rate[5] == rate[0] == 0.0
    bulk_rate = {p.priority: p.sent_per_second_1m for p in bulk.priorities}
    assert bulk_rate[0] == pytest.approx(rate[9], rel=0.05) and bulk_rate[9] == 0.0
    assert urgent.desired_workers_reason is None and bulk.desired_workers_reason is None
    assert (urgent.desired_workers, bulk.desired_workers) == (4, 2)
    assert urgent.record()["priorities"][0]["sent_per_second_1m"] == rate[9]


def test_rule_41_sends_per_priority_are_kept_an_hour_and_pruned_past_it(
        broker: hailq.Broker, raw: RawDatabase) -> None:
    q = broker.queue("claims", slo=SLO, order="deadline")
    q.send("now", priority=9)
    sends = raw.table("hailq_sends" if raw.is_sqlite else "sends")
    (slot,) = raw.execute(f"SELECT slot FROM {sends}")[0]
    columns = "queue, slot, priority, sent" + ("" if raw.is_sqlite else ", shard")
    for back in (400, 300):  # slots of 10 s: one past an hour and a minute, one within
        raw.execute(f"INSERT INTO {sends} ({columns}) VALUES (?, ?, ?, ?"
                    + ("" if raw.is_sqlite else ", 0") + ")", ("claims", slot - back, 0, 5))
    broker.backend.maintenance_prune(PruneParams("figures"))  # the maintenance duty's turn
    kept = sorted(int(s) for (s,) in raw.execute(f"SELECT slot FROM {sends}"))
    assert kept == [slot - 300, slot]
    # The old slot is outside every window; the one within the hour is not in the minute.
    assert {p.priority: p.sent_per_second_1m for p in q.figures().priorities}[0] == 0.0
