"""Readable failures in the CLI: ``hailq show`` prints tracebacks as lines with hailq's
frames folded, each distinct error once; ``hailq dead --group`` groups by error."""

from __future__ import annotations

import hailq

from .conftest import Hailq, kill_messages

TRACEBACK = "\n".join([
    "Traceback (most recent call last):",
    '  File "/venv/lib/python3.12/site-packages/hailq/runtime/worker.py", line 9, in _handle',
    "    call_handler(handler, message, services.loop, running)",
    '  File "/venv/lib/python3.12/site-packages/hailq/runtime/executor.py", line 74, in call',
    "    result = handler(message)",
    '  File "/app/billing.py", line 12, in charge',
    "    raise ValueError(f'card declined: {card}')",
    "ValueError: card declined: 4242",
])


def test_show_prints_each_distinct_error_once_as_lines(hq_any: Hailq,
                                                       api_any: hailq.Broker) -> None:
    q = api_any.queue("billing", max_attempts=3)
    sent = q.send({"card": 4242})
    for error in (TRACEBACK, TRACEBACK, "lease expired"):
        (m,) = q.receive()
        m.nack(error=error, delay=0)
    out = hq_any("show", "billing", sent).out
    lines = out.splitlines()
    assert "\\n" not in out  # no escaped line breaks in a cell
    assert "errors: 3 attempt(s), 2 distinct" in out
    assert out.count("ValueError: card declined: 4242") == 1  # two attempts, shown once
    assert any(line.startswith("attempt #1, #2 (") for line in lines)
    assert any(line.startswith("attempt #3 (") for line in lines)
    assert "    … 2 hailq frames …" in lines
    assert '    File "/app/billing.py", line 12, in charge' in lines
    assert "      raise ValueError(f'card declined: {card}')" in lines
    assert "worker.py" not in out and "executor.py" not in out
    # --json keeps every attempt's error whole.
    shown = hq_any("show", "billing", sent, "--json").json()
    assert [e["error"] for e in shown["errors"]] == [TRACEBACK, TRACEBACK, "lease expired"]


def test_show_escapes_control_characters_in_errors(hq: Hailq, api: hailq.Broker) -> None:
    [dead] = kill_messages(api, "jobs", [1], ["line one\nbad \x1b[31mred\x1b[0m"])
    out = hq("show", "jobs", dead).out
    assert "\x1b" not in out and "\\x1b[31mred" in out
    assert "  line one\n" in out


def test_dead_group_counts_each_error_with_first_and_last_seen(
        hq_any: Hailq, api_any: hailq.Broker) -> None:
    ids = kill_messages(api_any, "jobs", list(range(6)),
                        [TRACEBACK, "TimeoutError: slow", TRACEBACK,
                         TRACEBACK.replace("/app/billing.py", "/app/other.py"),
                         "TimeoutError: slow", TRACEBACK])
    dead = {d.id: d for d in api_any.get_queue("jobs").dead_letters()}
    groups = hq_any("dead", "jobs", "--group", "--json").json()
    assert [(g["error"], g["count"], g["example_id"]) for g in groups] == [
        ("ValueError: card declined: 4242", 4, ids[0]),
        ("TimeoutError: slow", 2, ids[1])]
    first = groups[0]
    assert first["first_seen"] == dead[ids[0]].errors[0].at
    assert first["last_seen"] == dead[ids[5]].errors[0].at
    assert first["example_error"] == TRACEBACK
    table = hq_any("dead", "jobs", "--group").out
    assert "by error" in table and "ValueError: card declined: 4242" in table
    assert ids[0] in table and ids[1] in table and ids[2] not in table
    # Filters and --limit choose the letters that are grouped, and say what was left out.
    cut = hq_any("dead", "jobs", "--group", "--limit", "2", "--json")
    assert [(g["error"], g["count"]) for g in cut.json()] == [
        ("TimeoutError: slow", 1), ("ValueError: card declined: 4242", 1)]
    assert "showing 2 of 6" in cut.err
    grep = hq_any("dead", "jobs", "--group", "--grep", "Timeout", "--json").json()
    assert [(g["error"], g["count"]) for g in grep] == [("TimeoutError: slow", 2)]
    api_any.queue("empty-one")
    assert "no dead messages" in hq_any("dead", "empty-one", "--group").out
    assert hq_any("dead", "empty-one", "--group", "--json").json() == []
