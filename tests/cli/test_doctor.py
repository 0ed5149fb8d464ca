"""Rule 26: ``hailq doctor`` as a command: exit codes, its one JSON shape, its table.

State is arranged through the Python API on the real database (consumers that
receive, nack and ack as a program would); the real-worker scenarios of each
mistake are in tests/faults/test_doctor.py.
"""

from __future__ import annotations

import json
import shlex
import sqlite3
import time
from datetime import timedelta

import pytest

import hailq
from hailq.doctor import examine
from hailq.policy.diagnosis import round_up
from waiting import wait_past

from .conftest import Hailq


def _fail_every_attempt(q: hailq.Queue, error: str) -> None:
    """Receive and nack until no message is left alive: every one sent since the last
    ack is dead (the queue's retries at ~0 s)."""
    deadline = time.monotonic() + 30
    while (s := q.stats()).backlog + s.in_flight and time.monotonic() < deadline:
        for m in q.receive(10, wait=0.2):
            m.nack(delay=0, error=error)


def _flush(broker: hailq.Broker) -> None:
    """Write the figures this process counted (as every consumer's do once a second and
    at close); the broker opens new connections if used again."""
    broker.close()


def test_rule_26_doctor_healthy_exits_0_with_one_json_shape(hq_any: Hailq,
                                                            api_any: hailq.Broker) -> None:
    q = api_any.queue("claims")
    q.send({"claim": 8311})
    for m in q.receive(1):
        m.ack()
    _flush(api_any)
    done = hq_any("doctor", "--json")
    assert done.code == 0, done.err
    assert json.loads(done.out) == {
        "healthy": True, "since": 900.0, "findings": [], "notes": [],
        "queues": [{"queue": "claims", "healthy": True, "findings": []}]}
    table = hq_any("doctor")
    assert table.code == 0 and "claims: no finding" in table.out


def test_rule_26_doctor_names_poison_and_exits_3(hq_any: Hailq,
                                                api_any: hailq.Broker) -> None:
    q = api_any.queue("claims", max_attempts=3, retry={"base": 0.001, "jitter": 0})
    api_any.queue("other").send({"fine": True})
    q.send_many([{"claim": 1}, {"claim": 2}])
    _fail_every_attempt(q, "Traceback (most recent call last):\nValueError: corrupt photo")
    _flush(api_any)
    done = hq_any("doctor", "--json")
    assert done.code == 3, done.err
    report = json.loads(done.out)
    assert report["healthy"] is False
    # The retries went to a loop without an inbox: a duplicate-effect risk beside the poison.
    assert report["queues"] == [
        {"queue": "claims", "healthy": False, "findings": ["poison", "duplicate_effects"]},
        {"queue": "other", "healthy": True, "findings": []}]
    f, effects = report["findings"]
    assert effects["evidence"]["redelivered"] == 4 and effects["evidence"]["inbox_runs"] == 0
    assert f["queue"] == "claims" and f["kind"] == "poison"
    assert f["evidence"]["error"] == "ValueError: corrupt photo"
    assert f["evidence"]["dead_letters"] == 2 and f["evidence"]["attempts"] == 6
    assert set(f) == {"queue", "kind", "title", "evidence", "suggestion", "snippets"}
    assert {s["kind"] for s in f["snippets"]} == {"shell", "python"}
    # --queue narrows it; the shape stays the same.
    only = hq_any("doctor", "--queue", "other", "--json")
    assert only.code == 0 and json.loads(only.out)["queues"] == [
        {"queue": "other", "healthy": True, "findings": []}]
    table = hq_any("doctor", "-q", "claims")
    assert table.code == 3
    assert "claims: poison" in table.out and "hailq dead claims --grep" in table.out
    assert "2 finding(s) on 1 of 1 queue(s) in the last 15 minutes" in table.out


def test_rule_26_doctor_names_a_lease_too_short_from_late_acks(hq_any: Hailq,
                                                              api_any: hailq.Broker) -> None:
    """A consumer of its own that works past its lease and acks late, no worker death: its
    handler time (0.6 s, measured from receive to ack) sets the suggestion. Late acks
    are counted per slot: one in the window is a finding."""
    q = api_any.queue("slow", lease=0.3)
    q.send({"n": 1})
    [m] = q.receive(1)
    wait_past(api_any.now, m.lease_until + 0.3)  # a handler of 0.6 s past its 0.3 s lease
    m.ack()  # nobody received it since: a late ack, counted
    assert q.stats().late_acks == 1
    _flush(api_any)
    done = hq_any("doctor", "--json")
    report = json.loads(done.out)
    assert done.code == 3
    [f] = report["findings"]
    assert f["kind"] == "lease_too_short"
    assert f["evidence"]["late_acks"] == 1 and f["evidence"]["worker_deaths"] == 0
    handler = f["evidence"]["handler_max"]
    assert 0.6 <= handler < 5.0, f  # 0.6 s, or more where the machine was slow
    lease = f["evidence"]["suggested_lease"]  # 3 x 0.6 = 1.8, rounded up: 2 s
    # 3 x the p99 (within its 5 % bound of the one run's time), a round number
    assert lease == round_up(lease) and lease >= max(2.0, 3 * handler * 0.95)
    assert f["snippets"] == [
        {"kind": "shell", "code": f"hailq configure slow --lease {lease:g}"},
        {"kind": "python", "code": f"broker.configure('slow', lease={lease:g})"}]


def test_rule_26_doctor_failures_keep_their_codes(hq_any: Hailq,
                                                 api_any: hailq.Broker) -> None:
    api_any.queue("claims")
    hq_any("doctor", "--queue", "nope").assert_clean_error(1)
    hq_any("doctor", "--queue", "bad name!").assert_clean_error(2)


# What moving stored time back touches: dead letters' deaths, and the 10-second slots of
# the figures (rates, percentile sketches and their ranges, counter samples).
_MOVES = ["UPDATE {p}messages SET dead_at = dead_at - {s} WHERE state = 'dead'",
          "UPDATE {p}rates SET slot = slot - {n}",
          "UPDATE {p}sketches SET slot = slot - {n}",
          "UPDATE {p}sketch_ranges SET slot = slot - {n}",
          "UPDATE {p}samples SET slot = slot - {n}, at = at - {s}"]


def _move_back(url: str, seconds: int) -> None:
    """Move what is stored ``seconds`` back (a multiple of 10: whole slots), in the real
    database, as if it had happened then (the PostgreSQL backend has no clock to inject:
    it always reads the server's)."""
    args = {"s": seconds, "n": seconds // 10}
    if url.startswith("sqlite:"):
        conn = sqlite3.connect(url[len("sqlite:///"):].split("?")[0])
        with conn:
            for move in _MOVES:
                conn.execute(move.format(p="hailq_", **args))
        conn.close()
        return
    import psycopg

    schema = url.split("schema=")[1].split("&")[0]
    with psycopg.connect(url.split("?")[0]) as pg:
        pg.execute(psycopg.sql.SQL("SET search_path TO {}").format(
            psycopg.sql.Identifier(schema)))
        for move in _MOVES:
            pg.execute(move.format(p="", **args))


def test_rule_26_poison_one_finding_per_error_and_python_shown_as_python(
        hq_any: Hailq, api_any: hailq.Broker) -> None:
    q = api_any.queue("claims", max_attempts=2, retry={"base": 0.001, "jitter": 0})
    q.send({"claim": 1})
    _fail_every_attempt(q, "Traceback (most recent call last):\nValueError: corrupt photo")
    q.send({"claim": 2})
    _fail_every_attempt(q, "Traceback (most recent call last):\nKeyError: 'policy'")
    _flush(api_any)
    done = hq_any("doctor", "--json")
    assert done.code == 3, done.err
    found = [f for f in json.loads(done.out)["findings"] if f["kind"] == "poison"]
    assert [(f["evidence"]["error"], f["evidence"]["dead_letters"]) for f in found] == [
        ("KeyError: 'policy'", 1), ("ValueError: corrupt photo", 1)]
    for f in found:  # one suggestion per error, naming its own error
        other = "corrupt photo" if "KeyError" in f["evidence"]["error"] else "KeyError"
        assert other not in f["suggestion"] + json.dumps(f["snippets"])
    for f in found:  # each group's listing command, as a shell splits it, lists that group
        [listing] = [s["code"] for s in f["snippets"] if s["code"].startswith("hailq dead ")]
        listed = hq_any(*shlex.split(listing)[1:], "--json").json()
        assert [d["id"] for d in listed] == f["evidence"]["message_ids"], listing
    table = hq_any("doctor")
    assert table.code == 3
    assert "$ hailq dead claims --grep 'ValueError: corrupt photo'" in table.out
    assert "$ hailq dead claims --grep \"KeyError: 'policy'\"" in table.out
    # Python is labelled and shown as code, never as a shell line.
    assert "Python:" in table.out and "except ValueError as exc:" in table.out
    assert "$ try" not in table.out and "$ raise" not in table.out
    assert not any(line.strip(" │").startswith("$ ") and "hailq." in line.split("$ ")[1][:7]
                   for line in table.out.splitlines())


def test_rule_26_36_dead_letters_before_the_window_leave_the_queue_healthy(
        hq_any: Hailq, api_any: hailq.Broker, url: str) -> None:
    """A poison incident an hour ago, nothing since: exit 0 and a note; --since reaching
    back finds it again; a new dead letter in the window is a finding again."""
    q = api_any.queue("claims", max_attempts=2, retry={"base": 0.001, "jitter": 0})
    q.send_many([{"claim": 1}, {"claim": 2}])
    _fail_every_attempt(q, "ValueError: corrupt photo")
    _flush(api_any)
    _move_back(url, 3600)
    done = hq_any("doctor", "--json")
    assert done.code == 0, done.out
    report = json.loads(done.out)
    assert report["healthy"] is True and report["findings"] == []
    [note] = report["notes"]
    assert note["kind"] == "earlier_dead_letters" and note["evidence"]["dead_letters"] == 2
    table = hq_any("doctor")
    assert table.code == 0 and "earlier_dead_letters" in table.out
    assert "nothing found in the last 15 minutes" in table.out
    back = hq_any("doctor", "--since", "2h", "--json")
    assert back.code == 3 and json.loads(back.out)["since"] == 7200.0
    assert [f["kind"] for f in json.loads(back.out)["findings"]] == [
        "poison", "duplicate_effects"]
    q.send({"claim": 3})
    _fail_every_attempt(q, "ValueError: corrupt photo")
    _flush(api_any)
    again = json.loads(hq_any("doctor", "--json").out)
    [f] = [f for f in again["findings"] if f["kind"] == "poison"]
    assert f["evidence"]["dead_letters"] == 1  # the two of an hour ago: still a note
    assert [n["evidence"]["dead_letters"] for n in again["notes"]] == [2]


def test_rule_26_since_takes_durations_up_to_a_day(hq_any: Hailq,
                                                  api_any: hailq.Broker) -> None:
    api_any.queue("claims")
    for text, seconds in [("90s", 90.0), ("1h30m", 5400.0), ("1d", 86400.0)]:
        done = hq_any("doctor", "--since", text, "--json")
        assert done.code == 0 and json.loads(done.out)["since"] == seconds, (text, done.err)
    for bad in ["2d", "25h", "5s", "0", "soon", "-1h", "1h-", "nan", ""]:
        line = hq_any("doctor", "--since", bad).assert_clean_error(2)
        assert "--since" in line, line


def test_rule_26_36_retries_and_redeliveries_an_hour_ago_clean_since_exit_0(
        hq_any: Hailq, url: str) -> None:
    """The issue's doctor that cries wolf: a queue that retried, was redelivered after an
    ended lease and dead-lettered poison an hour ago, by a loop of its own without an
    inbox, and has been clean since. Its figures are real (recorded by the consumer as
    it received, nacked and acked), then moved an hour back: exit 0, notes only; the
    same figures inside the window are findings (exit 3)."""
    with hailq.connect(url) as broker:
        q = broker.queue("billing", lease=0.5, max_attempts=2,
                         retry={"base": 0.001, "jitter": 0})
        q.send_many([{"n": i} for i in range(3)])
        for m in q.receive(3):
            m.nack(delay=0, error="ConnectionError: payments API")  # a retry each
        retried = q.receive(3, wait=2)
        assert len(retried) == 3 and all(m.attempt == 2 for m in retried)
        for m in retried:
            m.ack()
        q.send({"n": 3})
        [held] = q.receive(1)  # its lease ends under it: no nack, no ack
        wait_past(broker.now, held.lease_until)
        [again] = q.receive(1, wait=2)  # redelivered after the lease
        assert again.id == held.id
        again.ack()
        q.send({"n": 4, "poison": True})
        _fail_every_attempt(q, "ValueError: corrupt invoice")
        stats = q.stats()
    assert (stats.redelivered, stats.dead) == (5, 1), stats
    found = hq_any("doctor", "--json")
    assert found.code == 3, found.out
    report = json.loads(found.out)
    kinds = sorted(f["kind"] for f in report["findings"])
    assert kinds == ["duplicate_effects", "lease_too_short", "poison"], report
    effects = next(f for f in report["findings"] if f["kind"] == "duplicate_effects")
    assert effects["evidence"]["redelivered"] == 5 and effects["evidence"]["inbox_runs"] == 0
    lease = next(f for f in report["findings"] if f["kind"] == "lease_too_short")
    assert lease["evidence"]["redelivered_after_lease"] == 1

    _move_back(url, 3600)
    done = hq_any("doctor", "--json")
    assert done.code == 0, done.out
    report = json.loads(done.out)
    assert report["healthy"] is True and report["findings"] == []
    assert [n["kind"] for n in report["notes"]] == ["earlier_dead_letters"]
    table = hq_any("doctor")
    assert table.code == 0 and "billing: no finding" in table.out
    # Looking back two hours finds the incident again.
    back = hq_any("doctor", "--since", "2h", "--json")
    assert back.code == 3
    assert sorted(f["kind"] for f in json.loads(back.out)["findings"]) == kinds


def test_rule_26_examine_from_python_reads_the_same_window(api_any: hailq.Broker) -> None:
    q = api_any.queue("claims", max_attempts=2, retry={"base": 0.001, "jitter": 0})
    q.send({"claim": 1})
    _fail_every_attempt(q, "ValueError: corrupt photo")
    _flush(api_any)
    [d] = examine(api_any, ["claims"], since=timedelta(minutes=5))
    assert [f.kind for f in d.findings] == ["poison", "duplicate_effects"]
    for bad in (0, 5, 2 * 86400, timedelta(days=2), -60):
        with pytest.raises(hailq.InvalidArgument):
            examine(api_any, since=bad)
    with pytest.raises(hailq.QueueNotFound):
        examine(api_any, ["nope"])


def test_rule_26_doctor_reads_the_newest_dead_letters_behind_a_thousand_older(
        hq_any: Hailq, api_any: hailq.Broker, url: str) -> None:
    """More than the 1,000 dead letters the doctor reads, all an hour old but one: the
    newest, inside the window, is read first and named; the listing's newest-first order
    holds on each backend."""
    from hailq.backends.base import DeadListParams

    q = api_any.queue("claims", max_attempts=1)
    old = 1_050
    q.send_many([{"n": n} for n in range(old)])
    while got := q.receive(100, lease=0.1):  # their only attempt ends with the lease
        last = got[-1]
    wait_past(api_any.now, last.lease_until)
    q.maintain()  # dead (rule 13), each with its lease's end as its death
    assert q.stats().dead == old
    _move_back(url, 3600)  # an hour ago: before the window
    q.send_many([{"n": "new"}, {"n": "newer"}])
    new = q.receive(2)
    for m in new:  # two with one error: poison
        m.nack(error="Traceback (most recent call last):\nKeyError: 'policy'")
    listing = api_any.backend.dead_list(DeadListParams("claims", limit=3, newest_first=True))
    assert [d.body for d in listing][:2] == [{"n": "newer"}, {"n": "new"}]
    assert listing[0].dead_at >= listing[1].dead_at > listing[2].dead_at
    assert q.dead_letters(limit=1)[0].body == {"n": 0}  # the oldest first by default
    [found] = examine(api_any, ["claims"])
    [poison] = [f for f in found.findings if f.kind == "poison"]
    assert poison.evidence["error"] == "KeyError: 'policy'"
    assert poison.evidence["message_ids"] == [m.id for m in new]
    [note] = found.notes
    assert note.kind == "earlier_dead_letters" and note.evidence["dead_letters"] == 998
    _flush(api_any)
    assert hq_any("doctor", "--json").code == 3
