"""Rule 26: ``hailq doctor`` as a command: exit codes, its one JSON shape, its table.

State is arranged through the Python API on the real database (consumers that
receive, nack and ack as a program would); the real-worker scenarios of each
mistake are in tests/faults/test_doctor.py.
"""

from __future__ import annotations

import json
import time

import hailq

from .conftest import Hailq


def _fail_every_attempt(q: hailq.Queue, error: str) -> None:
    """Receive and nack until every message is dead (the queue's retries at ~0 s)."""
    deadline = time.monotonic() + 30
    while q.stats().dead < q.stats().sent and time.monotonic() < deadline:
        for m in q.receive(10, wait=0.2):
            m.nack(delay=0, error=error)


def test_rule_26_doctor_healthy_exits_0_with_one_json_shape(hq_any: Hailq,
                                                            api_any: hailq.Broker) -> None:
    q = api_any.queue("claims")
    q.send({"claim": 8311})
    for m in q.receive(1):
        m.ack()
    done = hq_any("doctor", "--json")
    assert done.code == 0, done.err
    assert json.loads(done.out) == {
        "healthy": True, "findings": [], "notes": [],
        "queues": [{"queue": "claims", "healthy": True, "findings": []}]}
    table = hq_any("doctor")
    assert table.code == 0 and "claims: no finding" in table.out


def test_rule_26_doctor_names_poison_and_exits_3(hq_any: Hailq,
                                                api_any: hailq.Broker) -> None:
    q = api_any.queue("claims", max_attempts=3, retry={"base": 0.001, "jitter": 0})
    api_any.queue("other").send({"fine": True})
    q.send_many([{"claim": 1}, {"claim": 2}])
    _fail_every_attempt(q, "Traceback (most recent call last):\nValueError: corrupt photo")
    done = hq_any("doctor", "--json")
    assert done.code == 3, done.err
    report = json.loads(done.out)
    assert report["healthy"] is False
    assert report["queues"] == [{"queue": "claims", "healthy": False, "findings": ["poison"]},
                                {"queue": "other", "healthy": True, "findings": []}]
    [f] = report["findings"]
    assert f["queue"] == "claims" and f["kind"] == "poison"
    assert f["evidence"]["errors"][0]["error"] == "ValueError: corrupt photo"
    assert f["evidence"]["errors"][0]["attempts"] == 6
    assert set(f) == {"queue", "kind", "title", "evidence", "suggestion", "commands"}
    # --queue narrows it; the shape stays the same.
    only = hq_any("doctor", "--queue", "other", "--json")
    assert only.code == 0 and json.loads(only.out)["queues"] == [
        {"queue": "other", "healthy": True, "findings": []}]
    table = hq_any("doctor", "-q", "claims")
    assert table.code == 3
    assert "claims: poison" in table.out and "hailq dead claims --grep" in table.out
    assert "1 finding(s) on 1 of 1 queue(s)" in table.out


def test_rule_26_doctor_names_a_lease_too_short_from_late_acks(hq_any: Hailq,
                                                              api_any: hailq.Broker) -> None:
    """A consumer of its own that works past its lease and acks late, no worker death:
    without measured handler time the suggestion is twice the lease, rounded up."""
    q = api_any.queue("slow", lease=0.3)
    q.send({"n": 1})
    [m] = q.receive(1)
    time.sleep(0.6)
    m.ack()  # nobody received it since: a late ack, counted
    assert q.stats().late_acks == 1
    done = hq_any("doctor", "--json")
    assert done.code == 3
    [f] = json.loads(done.out)["findings"]
    assert f["kind"] == "lease_too_short"
    assert f["evidence"]["late_acks"] == 1 and f["evidence"]["worker_deaths"] == 0
    assert f["evidence"]["suggested_lease"] == 1.0
    assert f["commands"] == ["hailq configure slow --lease 1"]


def test_rule_26_doctor_failures_keep_their_codes(hq_any: Hailq,
                                                 api_any: hailq.Broker) -> None:
    api_any.queue("claims")
    hq_any("doctor", "--queue", "nope").assert_clean_error(1)
    hq_any("doctor", "--queue", "bad name!").assert_clean_error(2)
