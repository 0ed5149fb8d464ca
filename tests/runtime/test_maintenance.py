"""The maintenance service: the broker's housekeeping, once per interval however many
processes run it, in bounded batches, skipped by a role that may only read (rule 30)."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import hailq
from hailq.backends.base_parts import MaintenanceClaimParams, PruneParams
from hailq.runtime.maintenance import UPKEEP, Maintenance, Upkeep
from waiting import wait_for, wait_past

EVERY = 0.5  # seconds between the test duties' turns

# A worker process running the maintenance service with short intervals (and no more).
CHILD = textwrap.dedent(f"""
    import sys
    import hailq
    from hailq.runtime.maintenance import Upkeep
    from hailq.runtime.worker import Worker
    broker = hailq.connect(sys.argv[1])
    Worker(broker, {{"jobs": lambda m: None}}, scheduler=False, registry_interval=0.2,
           upkeep=[Upkeep("dedup", {EVERY!r}), Upkeep("workers", {EVERY!r}, keep=86400.0)]).run()
""")


def turns(broker: hailq.Broker, duty: str) -> int:
    return next((t.runs for t in broker.backend.maintenance_list() if t.duty == duty), 0)


def test_a_turn_is_taken_once_until_it_is_due_again(broker: hailq.Broker) -> None:
    dedup = MaintenanceClaimParams("dedup", 0.3)
    assert broker.backend.maintenance_claim(dedup)
    assert not broker.backend.maintenance_claim(dedup)  # another process's turn
    [turn] = broker.backend.maintenance_list()
    assert (turn.duty, turn.runs, turn.ran_by) == ("dedup", 1, f"{os.uname()[1]}:{os.getpid()}")
    wait_past(broker.now, turn.next_due)
    assert broker.backend.maintenance_claim(dedup)
    assert turns(broker, "dedup") == 2


def test_rule_04_expired_dedup_records_are_pruned_in_bounded_batches(broker: hailq.Broker) -> None:
    queue = broker.queue("jobs", dedup_window=0.2)
    for n in range(5):
        queue.send(n, dedup_id=f"d{n}")
    wait_past(broker.now, broker.now() + 0.25)
    # Two statements of two and one of one: what a batch leaves, the next takes.
    assert broker.backend.maintenance_prune(PruneParams("dedup", limit=2)) == 5
    assert broker.backend.maintenance_prune(PruneParams("dedup")) == 0
    assert queue.send("again", dedup_id="d0") != ""  # the id may be used again


def test_rule_40_history_past_its_retention_is_pruned_by_the_service_not_a_claim(
        broker: hailq.Broker) -> None:
    short, long = broker.queue("short", retain=0.3), broker.queue("long", retain="1d")
    for queue in (short, long):
        queue.send_many(["a", "b"])
        queue.ack_many(queue.receive(2))
    wait_past(broker.now, broker.now() + 0.35)
    broker.backend.shared.maintained.clear()  # type: ignore[attr-defined]
    short.send("c")
    assert short.receive(1)  # a claim, its queue's upkeep due: history is not its work
    assert len(broker.history(queue="short")) == 2
    [duty] = [d for d in UPKEEP if d.name == "history"]
    service = Maintenance(broker, [duty], look=0.05)
    service.start()
    try:
        wait_for(lambda: service.done.get("history", 0) >= 1, 30, "a history turn")
    finally:
        service.close()
    assert broker.history(queue="short") == []
    assert len(broker.history(queue="long")) == 2  # within its retention: kept


def test_a_service_does_its_duties_on_its_turns(broker: hailq.Broker) -> None:
    service = Maintenance(broker, [Upkeep("dedup", 0.2)], look=0.05)
    service.start()
    try:
        wait_for(lambda: service.done.get("dedup", 0) >= 2, 30, "two turns")
    finally:
        service.close()
    assert turns(broker, "dedup") == service.done["dedup"]


def test_four_worker_processes_do_each_duty_once_per_interval(url: str,
                                                              tmp_path: Path) -> None:
    broker = hailq.connect(url)
    broker.queue("jobs")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    children = [subprocess.Popen([sys.executable, "-c", CHILD, url], env=env,
                                 stderr=subprocess.DEVNULL) for _ in range(4)]
    try:
        wait_for(lambda: len([w for w in broker.workers() if w.state == "running"]) == 4,
                 60, "four running workers")
        # Counted from a turn's start, so the span holds whole intervals.
        first = turns(broker, "dedup") + 1
        wait_for(lambda: turns(broker, "dedup") >= first, 30, "a turn")
        began = broker.now()
        wait_for(lambda: turns(broker, "dedup") >= first + 6, 60, "six more turns")
        span = broker.now() - began
        taken = {d: turns(broker, d) for d in ("dedup", "workers")}
    finally:
        for child in children:
            child.send_signal(signal.SIGTERM)
        for child in children:
            child.wait(60)
        broker.close()
    # Each process asks every interval; one of them gets each turn. Four doing each duty
    # on their own would take four times as many.
    most = span / EVERY + 2
    assert taken["dedup"] - first <= most
    assert 0 < taken["workers"] <= (span + 60) / EVERY


def test_rule_30_a_role_that_may_only_read_skips_maintenance_quietly(
        reader_url: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    with hailq.connect(reader_url, migrate=False) as reader:
        service = Maintenance(reader, [Upkeep("dedup", 0.1)], look=0.05)
        wait_for(lambda: service.tick() is not None and service.skipping, 10, "a claim")
        assert service.done == {}
        assert reader.backend.maintenance_list() == []
    assert [r for r in caplog.records if r.levelno >= logging.INFO
            and r.name.startswith("hailq")] == []
