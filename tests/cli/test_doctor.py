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
    done = hq_any("doctor", "--json")
    assert done.code == 3, done.err
    report = json.loads(done.out)
    assert report["healthy"] is False
    assert report["queues"] == [{"queue": "claims", "healthy": False, "findings": ["poison"]},
                                {"queue": "other", "healthy": True, "findings": []}]
    [f] = report["findings"]
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
    assert "1 finding(s) on 1 of 1 queue(s) in the last 15 minutes" in table.out


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
    assert f["snippets"] == [{"kind": "shell", "code": "hailq configure slow --lease 1"},
                             {"kind": "python", "code": "broker.configure('slow', lease=1)"}]


def test_rule_26_doctor_failures_keep_their_codes(hq_any: Hailq,
                                                 api_any: hailq.Broker) -> None:
    api_any.queue("claims")
    hq_any("doctor", "--queue", "nope").assert_clean_error(1)
    hq_any("doctor", "--queue", "bad name!").assert_clean_error(2)


def _age_dead_letters(url: str, seconds: float) -> None:
    """Move every dead letter's death ``seconds`` back, in the real database (the
    PostgreSQL backend has no clock to inject: it always reads the server's)."""
    sql = "UPDATE {table} SET dead_at = dead_at - {mark} WHERE state = 'dead'"
    if url.startswith("sqlite:"):
        conn = sqlite3.connect(url[len("sqlite:///"):].split("?")[0])
        with conn:
            conn.execute(sql.format(table="hailq_messages", mark="?"), (seconds,))
        conn.close()
        return
    import psycopg

    schema = url.split("schema=")[1].split("&")[0]
    with psycopg.connect(url.split("?")[0]) as pg:
        pg.execute(psycopg.sql.SQL("SET search_path TO {}").format(
            psycopg.sql.Identifier(schema)))
        pg.execute(sql.format(table="messages", mark="%s"), (seconds,))


def test_rule_26_poison_one_finding_per_error_and_python_shown_as_python(
        hq_any: Hailq, api_any: hailq.Broker) -> None:
    q = api_any.queue("claims", max_attempts=2, retry={"base": 0.001, "jitter": 0})
    q.send({"claim": 1})
    _fail_every_attempt(q, "Traceback (most recent call last):\nValueError: corrupt photo")
    q.send({"claim": 2})
    _fail_every_attempt(q, "Traceback (most recent call last):\nKeyError: 'policy'")
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
    _age_dead_letters(url, 3600)
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
    assert [f["kind"] for f in json.loads(back.out)["findings"]] == ["poison"]
    q.send({"claim": 3})
    _fail_every_attempt(q, "ValueError: corrupt photo")
    again = json.loads(hq_any("doctor", "--json").out)
    [f] = again["findings"]
    assert f["evidence"]["dead_letters"] == 1


def test_rule_26_since_takes_durations_up_to_a_day(hq_any: Hailq,
                                                  api_any: hailq.Broker) -> None:
    api_any.queue("claims")
    for text, seconds in [("90s", 90.0), ("15m", 900.0), ("1h30m", 5400.0), ("1d", 86400.0),
                          ("600", 600.0)]:
        done = hq_any("doctor", "--since", text, "--json")
        assert done.code == 0 and json.loads(done.out)["since"] == seconds, (text, done.err)
    for bad in ["2d", "25h", "5s", "0", "soon", "-1h", "1h-", "nan", ""]:
        line = hq_any("doctor", "--since", bad).assert_clean_error(2)
        assert "--since" in line, line
