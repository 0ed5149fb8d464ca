"""What a worker process writes to stderr: lines an operator can grep (issue 21)."""

from __future__ import annotations

import json
import re
import signal
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

import hailq

from .conftest import StartWorker
from .support import done, wait_for

CLAIMS = {"lease": 2, "max_attempts": 3, "retry": {"base": 0.05, "jitter": 0}}


def _lines_about(log: str, message_id: str) -> list[str]:
    return [line for line in log.splitlines() if message_id in line]


def _run_to_the_end(broker: hailq.Broker, start_worker: StartWorker, effects: str,
                    *args: str) -> tuple[dict[str, str], str]:
    """Run a worker over one good, one retried and one poison claim, stop it, return the
    ids by role and the worker's stderr."""
    claims = broker.queue("claims", **CLAIMS)
    ids = {"good": claims.send({"n": 1}),
           "retried": claims.send({"n": 2, "do": "retry_first", "delay": 0.3}),
           "poison": claims.send({"n": 3, "do": "raise"})}
    worker = start_worker("handlers:app", "-q", "claims", *args, log_name="worker-logs.log")
    wait_for(lambda: len(done(effects)) == 2 and claims.stats().dead == 1, timeout=60,
             what="two claims done and the poison dead")
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    log_path = Path(str(effects)).parent / "worker-logs.log"
    return ids, log_path.read_text()


def test_debug_log_tells_each_message_from_receipt_to_end_and_the_last_line_sums_up(
        broker: hailq.Broker, start_worker: StartWorker, effects: str) -> None:
    ids, log = _run_to_the_end(broker, start_worker, effects, "--log-level", "DEBUG")
    good = _lines_about(log, ids["good"])
    assert re.search(r"DEBUG hailq\.worker: message \S+ of queue claims received "
                     r"\(attempt 1 of 3\)", good[0])
    assert re.search(r"DEBUG hailq\.worker: message \S+ of queue claims done in \d+ ms$",
                     good[-1])

    retried = _lines_about(log, ids["retried"])
    (retry,) = [line for line in retried if "retried" in line]
    assert " INFO " in retry and "retried in 0.3 s on attempt 1 of 3: downstream busy" in retry
    assert not [line for line in retried if " WARNING " in line or " ERROR " in line]

    poison = [line for line in _lines_about(log, ids["poison"]) if " DEBUG " not in line]
    assert len(poison) == 3
    assert " WARNING " in poison[0] and \
        "failed on attempt 1 of 3: ValueError: boom in claim 3" in poison[0]
    assert " WARNING " in poison[1] and "failed on attempt 2 of 3" in poison[1]
    assert " ERROR " in poison[2] and "failed on attempt 3 of 3, its last, and is " \
        "dead-lettered: ValueError: boom in claim 3" in poison[2]

    last = log.strip().splitlines()[-1]
    assert re.search(r"INFO hailq\.worker: worker \S+ stopped after \d+\.\d s: 2 done, "
                     r"2 failed, 1 retried, 1 dead-lettered, 0 given back$", last), last
    # Text lines start with the time in ISO 8601, with the zone's offset.
    stamp = last.split(" ", 1)[0]
    assert datetime.fromisoformat(stamp).utcoffset() is not None


def test_info_log_has_no_per_message_lines_for_work_that_went_well(
        broker: hailq.Broker, start_worker: StartWorker, effects: str) -> None:
    ids, log = _run_to_the_end(broker, start_worker, effects)
    assert " DEBUG " not in log
    assert not _lines_about(log, ids["good"])
    assert "given back" in log.strip().splitlines()[-1]


def test_a_dead_letter_by_the_handler_is_one_warning_with_its_reason(
        broker: hailq.Broker, start_worker: StartWorker, effects: str,
        tmp_path: Path) -> None:
    claims = broker.queue("claims", **CLAIMS)
    dead_id = claims.send({"n": 5, "do": "dead"})
    worker = start_worker("handlers:app", "-q", "claims", log_name="worker-dead.log")
    wait_for(lambda: claims.stats().dead == 1, what="the dead letter")
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    log = (tmp_path / "worker-dead.log").read_text()
    (line,) = _lines_about(log, dead_id)
    assert " WARNING " in line
    assert "dead-lettered by its handler on attempt 1 of 3: claim 5 is malformed" in line
    assert "0 done, 0 failed, 0 retried, 1 dead-lettered, 0 given back" in log


def test_the_last_line_counts_messages_given_back_at_shutdown(
        broker: hailq.Broker, start_worker: StartWorker, effects: str,
        tmp_path: Path) -> None:
    claims = broker.queue("claims", **CLAIMS)
    claims.send_many([{"n": n, "sleep": 20} for n in range(2)])
    worker = start_worker("handlers:app", "-q", "claims", "-c", "2", "--grace", "0.2",
                          log_name="worker-back.log")
    wait_for(lambda: claims.stats().in_flight == 2, what="both in flight")
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    last = (tmp_path / "worker-back.log").read_text().strip().splitlines()[-1]
    assert "0 done, 0 failed, 0 retried, 0 dead-lettered, 2 given back" in last


def _json_records(log: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.splitlines()]


@pytest.mark.parametrize("pool", ["thread", "process"])
def test_json_lines_carry_queue_message_id_attempt_and_a_time_with_its_zone(
        broker: hailq.Broker, start_worker: StartWorker, effects: str, pool: str) -> None:
    ids, log = _run_to_the_end(broker, start_worker, effects, "--json", "--log-level",
                               "DEBUG", "--pool", pool)
    records = _json_records(log)
    for record in records:
        stamp = datetime.fromisoformat(record["time"])
        assert stamp.utcoffset() is not None, record["time"]
    about = [r for r in records if r.get("message_id")]
    assert {r["message_id"] for r in about} == set(ids.values())
    for record in about:
        assert record["queue"] == "claims"
        assert isinstance(record["attempt"], int)
        assert record["message_id"] in record["message"]
    poison = [r for r in about if r["message_id"] == ids["poison"] and r["level"] != "DEBUG"]
    assert [(r["level"], r["attempt"]) for r in poison] == [
        ("WARNING", 1), ("WARNING", 2), ("ERROR", 3)]
    (retry,) = [r for r in about if r["message_id"] == ids["retried"] and r["level"] == "INFO"]
    assert retry["attempt"] == 1
    summaries = [r for r in records if " stopped after " in r["message"]]
    assert summaries and "1 dead-lettered" in " ".join(r["message"] for r in summaries)
