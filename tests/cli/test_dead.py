"""``hailq dead``, ``hailq redrive`` and ``hailq purge``: the dead-letter queue in bulk."""

from __future__ import annotations

import pytest

import hailq
from waiting import wait_past

from .conftest import Hailq, kill_messages


def test_dead_lists_attempts_and_last_error(hq_any: Hailq, api_any: hailq.Broker) -> None:
    ids = kill_messages(api_any, "jobs", [{"n": 1}, {"n": 2}],
                        ["Traceback\nValueError: bad claim 1", "TimeoutError: slow"])
    dead = hq_any("dead", "jobs", "--json").json()
    assert [d["id"] for d in dead] == ids
    assert dead[0]["last_error"] == "Traceback\nValueError: bad claim 1"
    assert dead[0]["attempt"] == 1
    assert dead[0]["errors"][0]["error"] == dead[0]["last_error"]
    assert dead[0]["body"] == {"n": 1}
    table = hq_any("dead", "jobs").out
    assert ids[0] in table and ids[1] in table
    assert "ValueError: bad claim 1" in table and "TimeoutError: slow" in table
    assert "Traceback" not in table  # the last line of the error is what tells


def test_dead_filters(hq: Hailq, api: hailq.Broker) -> None:
    kill_messages(api, "jobs", [1, 2], ["ValueError: x", "KeyError: y"])
    keyed = kill_messages(api, "jobs", [3], ["ValueError: z"], ordering_key="acct-1")
    grep = hq("dead", "jobs", "--grep", "ValueError", "--json").json()
    assert [d["body"] for d in grep] == [1, 3]
    by_key = hq("dead", "jobs", "--ordering-key", "acct-1", "--json").json()
    assert [d["id"] for d in by_key] == keyed
    assert hq("dead", "jobs", "--older-than", "3600", "--json").json() == []
    assert len(hq("dead", "jobs", "--older-than", "0", "--json").json()) == 3
    assert len(hq("dead", "jobs", "--limit", "2", "--json").json()) == 2
    assert "no dead messages" in hq("dead", "jobs", "--grep", "nothing like it").out


def test_dead_says_on_stderr_how_many_it_left_out(hq_any: Hailq,
                                                api_any: hailq.Broker) -> None:
    kill_messages(api_any, "jobs", [1, 2, 3, 4, 5], ["ValueError: a", "KeyError: b",
                                                      "ValueError: c", "ValueError: d", "e"])
    cut = hq_any("dead", "jobs", "--limit", "2", "--json")
    assert [d["body"] for d in cut.json()] == [1, 2]  # still valid JSON, oldest first
    assert cut.err == ("hailq: note: showing 2 of 5 dead letters of jobs; "
                       "use --limit to see more (up to 100,000)\n")
    assert "showing 2 of 5 dead letters of jobs" in hq_any("dead", "jobs", "-n", "2").err
    assert hq_any("dead", "jobs", "--limit", "5").err == ""
    # Filtered lists are not counted: one row beyond --limit tells that more match.
    grep = hq_any("dead", "jobs", "--grep", "ValueError", "--limit", "2", "--json")
    assert [d["body"] for d in grep.json()] == [1, 3]
    assert ("showing 2 of more than 2 dead letters of jobs that match; use --limit"
            in grep.err)
    assert hq_any("dead", "jobs", "--grep", "ValueError", "--limit", "3").err == ""


def test_redrive_dry_run_changes_nothing(hq_any: Hailq, api_any: hailq.Broker) -> None:
    ids = kill_messages(api_any, "jobs", [1, 2], ["boom", "boom"])
    result = hq_any("redrive", "jobs", "--dry-run", "--json").json()
    assert result["dry_run"] is True and result["redriven"] == 0
    assert [d["id"] for d in result["would_redrive"]] == ids
    table = hq_any("redrive", "jobs", "--dry-run").out
    assert "would redrive 2" in table and ids[0] in table
    assert api_any.get_queue("jobs").stats().dead == 2


def test_redrive_chosen_ids(hq_any: Hailq, api_any: hailq.Broker) -> None:
    first, second = kill_messages(api_any, "jobs", [1, 2], ["boom", "boom"])
    alive = api_any.get_queue("jobs").send(3)  # an id, but no dead message's
    result = hq_any("redrive", "jobs", "--id", second, "--id", alive, "--json")
    assert result.json()["redriven"] == 1
    assert result.json()["missing"] == [alive]
    assert alive in result.err  # warned about, on stderr
    (message, _) = api_any.get_queue("jobs").receive(max_messages=2)
    assert message.id == second and message.attempt == 1  # attempt was reset to 0
    assert [d.id for d in api_any.get_queue("jobs").dead_letters()] == [first]


def test_redrive_of_something_that_is_no_message_id_is_bad_input_as_in_python(
        hq_any: Hailq, api_any: hailq.Broker) -> None:
    """One answer: Python's redrive raises InvalidArgument, the CLI exits 2."""
    [first] = kill_messages(api_any, "jobs", [1], ["boom"])
    with pytest.raises(hailq.InvalidArgument):
        api_any.get_queue("jobs").redrive(["NOTANID"])
    line = hq_any("redrive", "jobs", "--id", first, "--id", "NOTANID").assert_clean_error(2)
    assert "NOTANID" in line and "message id" in line
    assert api_any.get_queue("jobs").stats().dead == 1  # nothing was redriven


def test_redrive_everything(hq_any: Hailq, api_any: hailq.Broker) -> None:
    kill_messages(api_any, "jobs", [1, 2, 3], ["a", "b", "c"])
    result = hq_any("redrive", "jobs")
    assert result.code == 0 and "redrove 3 message(s) of jobs" in result.out
    stats = api_any.get_queue("jobs").stats()
    assert (stats.dead, stats.ready) == (0, 3)


def test_redrive_by_filter(hq: Hailq, api: hailq.Broker) -> None:
    kill_messages(api, "jobs", [1, 2, 3], ["ValueError: a", "KeyError: b", "ValueError: c"])
    assert hq("redrive", "jobs", "--grep", "ValueError", "--json").json()["redriven"] == 2
    assert [d.body for d in api.get_queue("jobs").dead_letters()] == [2]


def test_purge_requires_confirmation_without_a_terminal(hq: Hailq, api: hailq.Broker) -> None:
    api.queue("jobs").send(1)
    line = hq("purge", "jobs").assert_clean_error()
    assert "--yes" in line
    assert api.get_queue("jobs").stats().ready == 1


def test_purge_live_messages(hq_any: Hailq, api_any: hailq.Broker) -> None:
    kill_messages(api_any, "jobs", ["dead"], ["boom"])
    q = api_any.get_queue("jobs")
    for n in range(3):
        q.send(n)
    q.send(99, delay=600)
    result = hq_any("purge", "jobs", "--yes", "--json").json()
    assert result == {"queue": "jobs", "dead": False, "deleted": 4}
    stats = q.stats()
    assert (stats.ready, stats.scheduled, stats.dead) == (0, 0, 1)
    assert "deleted 0 live message(s) of jobs" in hq_any("purge", "jobs").out


def test_purge_dead_messages_only(hq: Hailq, api: hailq.Broker) -> None:
    kill_messages(api, "jobs", [1, 2], ["a", "b"])
    api.get_queue("jobs").send(3)
    result = hq("purge", "jobs", "--dead", "--yes")
    assert result.code == 0 and "deleted 2 dead message(s) of jobs" in result.out
    stats = api.get_queue("jobs").stats()
    assert (stats.dead, stats.ready) == (0, 1)


def test_purge_of_an_empty_queue_needs_no_confirmation(hq: Hailq, api: hailq.Broker) -> None:
    api.queue("jobs")
    result = hq("purge", "jobs", "--dead")
    assert result.code == 0 and "deleted 0" in result.out


def test_redrive_stops_at_limit_and_says_what_is_left(hq_any: Hailq,
                                                      api_any: hailq.Broker) -> None:
    kill_messages(api_any, "jobs", [1, 2, 3, 4, 5], ["ValueError: a", "KeyError: b",
                                                      "ValueError: c", "ValueError: d", "e"])
    q = api_any.get_queue("jobs")
    first = hq_any("redrive", "jobs", "--limit", "2", "--json")
    assert first.json()["redriven"] == 2 and first.json()["more_left"] is True
    assert "redrove the 2 oldest; more dead letters of jobs are still dead" in first.err
    assert [d.body for d in q.dead_letters()] == [3, 4, 5]  # the oldest deaths went first
    # Filtered: the two oldest that match, then the one left, then nothing is said.
    grep = hq_any("redrive", "jobs", "--grep", "ValueError", "--limit", "1", "--json")
    assert grep.json()["more_left"] is True and "that match are still dead" in grep.err
    assert [d.body for d in q.dead_letters()] == [4, 5]
    last = hq_any("redrive", "jobs", "--grep", "ValueError", "--limit", "1", "--json")
    assert last.json() == {"queue": "jobs", "dry_run": False, "redriven": 1,
                           "missing": [], "more_left": False}
    assert last.err == ""
    assert [d.body for d in q.dead_letters()] == [5]


def test_redrive_dry_run_at_limit_says_more_would_stay(hq_any: Hailq,
                                                       api_any: hailq.Broker) -> None:
    kill_messages(api_any, "jobs", [1, 2, 3], ["a", "b", "c"])
    dry = hq_any("redrive", "jobs", "--dry-run", "--limit", "2", "--json")
    assert [d["body"] for d in dry.json()["would_redrive"]] == [1, 2]
    assert dry.json()["more_left"] is True and "more dead letters of jobs would stay" in dry.err
    exact = hq_any("redrive", "jobs", "--dry-run", "--limit", "3", "--json")
    assert exact.json()["more_left"] is False and exact.err == ""
    assert api_any.get_queue("jobs").stats().dead == 3


@pytest.mark.slow  # a long scenario: .ci/run runs it after make test
def test_more_dead_than_one_command_handles(hq: Hailq, api: hailq.Broker) -> None:
    """After a hailstorm: 100,001 dead, one more than a list or a filtered redrive takes."""
    q = api.queue("storm", max_attempts=1, lease=1)
    for _ in range(100):
        q.send_many([{"claim": n} for n in range(1000)])
    q.send("the last")
    ends = 0.0
    while got := q.receive(1000):  # every lease ends unacked: each one attempt is spent
        ends = got[-1].lease_until
    wait_past(api.now, ends)
    assert q.stats().dead == 100_001
    listed = hq("dead", "storm", "--grep", "lease expired", "--limit", "100000", "--json")
    assert len(listed.json()) == 100_000
    assert "there may be more: --limit 100,000 is the most" in listed.err
    first = hq("redrive", "storm", "--grep", "lease expired", "--json")
    assert (first.json()["redriven"], first.json()["more_left"]) == (100_000, True)
    assert "still dead: run the command again" in first.err
    (left,) = q.dead_letters()
    assert left.body == "the last"  # the oldest deaths were redriven first
    second = hq("redrive", "storm", "--grep", "lease expired", "--json")
    assert (second.json()["redriven"], second.json()["more_left"]) == (1, False)
    stats = q.stats()
    assert (stats.dead, stats.ready) == (0, 100_001)


def test_redrive_of_a_named_id_finds_it_beyond_the_limit(hq_any: Hailq,
                                                         api_any: hailq.Broker) -> None:
    ids = kill_messages(api_any, "jobs", [1, 2, 3], ["a", "b", "c"])
    # --limit caps how many are redriven; the newest death is still found by its id.
    result = hq_any("redrive", "jobs", "--id", ids[2], "--limit", "1", "--json").json()
    assert result["redriven"] == 1 and result["missing"] == []
    assert [d.id for d in api_any.get_queue("jobs").dead_letters()] == ids[:2]
    # Two named, one allowed: the other is still dead, not "not a dead message".
    result = hq_any("redrive", "jobs", "--id", ids[0], "--id", ids[1], "--limit", "1",
                    "--json")
    assert (result.json()["redriven"], result.json()["missing"]) == (1, [])
    assert result.json()["more_left"] is True and "not dead messages" not in result.err
    assert [d.id for d in api_any.get_queue("jobs").dead_letters()] == ids[1:2]
