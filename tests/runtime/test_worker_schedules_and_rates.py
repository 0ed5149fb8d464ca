"""Periodic schedules and rate limits with real ``hailq worker`` processes, as an
operator runs them (SPEC rules 33 and 35, issue 24), on both backends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import datetime

import hailq
from hailq.runtime.scheduler import SLOT_HEADER
from waiting import wait_past

from .conftest import StartWorker
from .support import done, wait_for


def _slots(broker: hailq.Broker) -> list[float]:
    """The slots of every tick sent so far (read without leasing), sorted."""
    ticks = broker.get_queue("ticks").peek(limit=1000)
    return sorted(datetime.fromisoformat(m.headers[SLOT_HEADER]).timestamp() for m in ticks)


def _fired(broker: hailq.Broker) -> int:
    """How many slots the schedule ``tick`` sent (0 before a worker declared it)."""
    return sum(s.fired for s in broker.schedules() if s.name == "tick")


def _stop(*workers: subprocess.Popen[str]) -> None:
    for worker in workers:
        worker.send_signal(signal.SIGTERM)
    for worker in workers:
        assert worker.wait(30) == 0


def test_rule_35_several_worker_processes_send_each_slot_once_and_after_downtime_only_the_latest(
        broker: hailq.Broker, start_worker: StartWorker) -> None:
    workers = [start_worker("handlers:periodic_app", "-q", "chores") for _ in range(3)]
    wait_for(lambda: _fired(broker) >= 3, timeout=60,
             what="three slots from the workers' schedulers")
    workers[0].kill()  # one dies: the others go on, and nothing is sent twice
    fired = _fired(broker)
    wait_for(lambda: _fired(broker) >= fired + 2, timeout=30,
             what="two more slots after a worker died")
    _stop(*workers[1:])
    before = _slots(broker)
    assert len(before) == _fired(broker) >= 5
    assert before == [before[0] + i for i in range(len(before))]  # each once, none missed

    wait_past(broker.now, before[-1] + 4.05)  # downtime: at least four slots go by
    restarted = start_worker("handlers:periodic_app", "-q", "chores")
    wait_for(lambda: len(_slots(broker)) >= len(before) + 3, timeout=60,
             what="slots from the restarted worker")
    _stop(restarted)
    after = _slots(broker)[len(before):]
    assert after[0] - before[-1] >= 4  # the missed slots were not sent as a burst ...
    assert after == [after[0] + i for i in range(len(after))]  # ... only the latest, once


def _configure(url: str, *args: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "HAILQ_URL"}
    result = subprocess.run(
        [sys.executable, "-m", "hailq.cli.main", "--url", url, "configure", "results", *args],
        env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_rule_33_an_operator_changes_the_rate_while_worker_processes_run(
        broker: hailq.Broker, start_worker: StartWorker, effects: str, url: str) -> None:
    results = broker.queue("results", rate="2/s", burst=1)
    results.send_many([{"n": n} for n in range(300)])
    began = time.monotonic()
    workers = [start_worker("handlers:rates_app", "-q", "results", "-c", "2")
               for _ in range(2)]
    wait_for(lambda: len(done(effects)) >= 4, timeout=60, what="the first starts")
    time.sleep(1.0)  # the scenario: the limit holds the pace for a while
    count, elapsed = len(done(effects)), time.monotonic() - began
    assert count <= 2 * elapsed + 1 + 2  # 2/s summed over both processes, one burst, slack

    _configure(url, "--rate", "200/s", "--burst", "20")  # at 2/s the rest would take 2.5 min
    wait_for(lambda: len(done(effects)) == 300, timeout=60,
             what="the raised limit to reach the running workers")

    _configure(url, "--rate", "1/h", "--burst", "1")
    time.sleep(1.0)  # the scenario: the settings a worker keeps for at most half a second
    results.send_many([{"n": n} for n in range(300, 310)])
    time.sleep(1.5)  # the scenario: unlimited, idle workers would take them within this
    assert len(done(effects)) <= 301  # at most the one token of the new bucket
    _configure(url, "--rate", "none")
    wait_for(lambda: len(done(effects)) == 310, timeout=60, what="the lifted limit")
    _stop(*workers)
    assert results.stats().ready == 0


def test_rule_35_a_worker_told_not_to_runs_no_scheduler(
        broker: hailq.Broker, start_worker: StartWorker) -> None:
    quiet = start_worker("handlers:periodic_app", "-q", "chores", "--no-scheduler")
    wait_for(lambda: broker.workers(), timeout=60, what="the worker to register")
    time.sleep(2.0)  # the scenario: two slots of the app's schedule go by, none fired
    assert _fired(broker) == 0
    assert "ticks" not in [q.name for q in broker.queues()] or \
        broker.get_queue("ticks").stats().sent == 0
    talkative = start_worker("handlers:periodic_app", "-q", "chores")
    wait_for(lambda: _fired(broker) >= 1, timeout=60, what="the other worker's scheduler")
    _stop(quiet, talkative)
