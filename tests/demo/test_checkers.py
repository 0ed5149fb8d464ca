"""The odd checkers on a real SQLite broker: the lone one, the slow one, the one that crashes."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import hailq
from hailq.demo import results as results_db
from hailq.demo.checkers import LoneChecker, SlowChecker, Tracker, make_check
from hailq.demo.children import Child, Line
from hailq.demo.story import CHECKS, Plan, make_claims
from waiting import wait_for

LEASE = 0.3


@pytest.fixture
def checks(sqlite_url: str) -> Iterator[hailq.Queue]:
    with hailq.connect(sqlite_url) as broker:
        yield broker.queue(CHECKS, lease=LEASE, max_attempts=2,
                           retry={"base": 0.01, "factor": 2.0, "max": 0.05, "jitter": 0.0})


@pytest.fixture
def store(tmp_path: Path) -> Iterator[results_db.ResultStore]:
    store = results_db.ResultStore(str(tmp_path / "results.db"))
    yield store
    store.close()


def claims(count: int, corrupt: int = 0) -> list[dict[str, Any]]:
    """``count`` good claims of 30 ms and ``corrupt`` corrupt ones."""
    made = make_claims(Plan(claims=200))
    good = [c.body() for c in made if not c.corrupt][:count]
    bad = [c.body() for c in made if c.corrupt][:corrupt]
    return [{**body, "check_ms": 30.0} for body in good + bad]


def eventually(condition: Any, timeout: float = 10) -> None:
    wait_for(condition, timeout, step=0.01)


def test_tracker_waits_until_another_checker_starts_the_claim_again() -> None:
    tracker = Tracker()
    assert not tracker.wait_received_again(7, 1, timeout=0.05)  # nobody did
    tracker.start(7, 1)
    assert not tracker.wait_received_again(7, 1, timeout=0.05)  # the same attempt: no
    threading.Timer(0.05, tracker.start, args=(7, 2)).start()
    assert tracker.wait_received_again(7, 1, timeout=5)
    stop = threading.Event()
    stop.set()
    assert not tracker.wait_received_again(8, 1, timeout=5, stop=stop)  # stopped: no wait


def test_tracker_takes_the_times_a_checker_process_reported() -> None:
    tracker = Tracker()
    tracker.start(1, 1, at=10.0)
    tracker.finish(True, at=10.5)
    tracker.start(2, 1, at=10.1)
    tracker.abandon()  # its checker was killed
    assert (tracker.started_at, tracker.last_result) == ({1: 10.0, 2: 10.1}, 10.5)
    assert (tracker.results, tracker.busy) == (1, 0)


def test_a_lone_checker_checks_retries_the_corrupt_claim_and_acks_before_it_stops(
        checks: hailq.Queue, store: results_db.ResultStore) -> None:
    checks.send_many(claims(3, corrupt=1))
    tracker = Tracker()
    stop = threading.Event()
    lone = threading.Thread(target=LoneChecker(checks, make_check(store, tracker),
                                               poll=0.05).run, args=(stop,))
    lone.start()
    eventually(lambda: tracker.results == 3 and checks.stats().dead == 1)
    stop.set()
    lone.join(5)
    stats = checks.stats()
    assert (stats.acked, stats.dead, stats.in_flight, stats.ready) == (3, 1, 0, 0)
    assert "CorruptPhoto" in (checks.dead_letters()[0].errors[-1].error or "")
    assert results_db.tally(store.path).done == 3


def test_the_slow_checkers_late_ack_is_rejected_once_another_checker_has_the_claim(
        checks: hailq.Queue, store: results_db.ResultStore) -> None:
    [claim] = claims(1)
    checks.send(claim)
    tracker = Tracker()
    slow = SlowChecker(checks, store, tracker, slowness=1.5)
    slow.take_next.set()
    slow.start()
    eventually(lambda: slow.busy_with_slow_claim)
    # Its lease ends, but it waits on: until then its ack would still be accepted (late).
    time.sleep(LEASE * 2)
    assert not slow.done.is_set()
    assert tracker.late_acks_rejected + tracker.late_acks_accepted == 0
    [again] = checks.receive(wait=5)  # another checker takes the claim
    assert again.attempt == 2
    make_check(store, tracker)(again)
    again.ack()
    assert slow.done.wait(5)
    slow.join(5)
    assert (tracker.late_acks_rejected, tracker.late_acks_accepted) == (1, 0)
    assert store.skipped == 1  # the slow checker's result was not written twice
    tally = results_db.tally(store.path)
    assert (tally.done, tally.duplicated) == (1, 0)
    assert checks.stats().acked == 1


def test_the_slow_checker_checks_normally_until_told_and_skips_the_corrupt_claim(
        checks: hailq.Queue, store: results_db.ResultStore) -> None:
    checks.send_many(claims(2))
    tracker = Tracker()
    slow = SlowChecker(checks, store, tracker)
    slow.start()
    eventually(lambda: tracker.results == 2)
    checks.send_many(claims(0, corrupt=1))
    slow.take_next.set()
    eventually(lambda: checks.stats().dead == 1)  # checked and failed twice, not slowly
    assert not slow.busy_with_slow_claim and not slow.done.is_set()
    slow.join(5)
    assert checks.stats().acked == 2


def test_the_checker_process_dies_mid_check_and_its_claim_comes_back(
        sqlite_url: str, checks: hailq.Queue, tmp_path: Path) -> None:
    [claim] = claims(1)
    checks.send(claim)
    lines: list[Line] = []
    results = str(tmp_path / "results.db")
    child = Child("checker", [sqlite_url, results, "checker-crashes"], tmp_path,
                  lines.append, name="checker-crashes")
    try:
        child.wait_for("ready", 60)
        child.tell("crash")
        child.tell("go")
        assert child.process.wait(30) == -9  # SIGKILL
    finally:
        child.stop()
    assert {"start": claim["claim"], "attempt": 1}.items() <= lines[1].items()
    assert lines[2]["crash"] == claim["claim"]
    assert "finish" not in {key for line in lines for key in line}  # it never finished
    assert results_db.tally(results).partial == 1  # what it wrote before it died
    [again] = checks.receive(wait=LEASE + 5)  # after the lease, the claim is back
    assert (again.body, again.attempt) == (claim, 2)
    assert (tmp_path / "checker-crashes.log").exists()
