"""The operator's commands (rule 32) and the CLI details found on the way: pause,
resume, configure, delete, delete-topic, unsubscribe, show, delete-message; send to
a queue that does not exist; Ctrl-C during send --file; worker targets written as
paths."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import hailq
from waiting import wait_for

from .conftest import Hailq, kill_messages, run_hailq


def test_pause_and_resume_show_in_stats_and_queues(hq_any: Hailq, api_any: hailq.Broker) -> None:
    claims = api_any.queue("claims")
    claims.send(1)
    assert hq_any("pause", "claims").out.strip() == "paused claims"
    assert claims.receive() == []
    [stats] = hq_any("stats", "claims", "--json").json()["queues"]
    assert stats["paused"] is True and stats["ready"] == 1
    [listed] = hq_any("queues", "--json").json()
    assert listed["paused"] is True
    assert "paused" in hq_any("queues").out
    assert hq_any("send", "claims", "2").code == 0  # sends are still accepted
    assert hq_any("resume", "claims", "--json").json() == {"queue": "claims", "paused": False}
    # This broker read "paused" at its first receive; another process's change reaches
    # it within a second (rule 32), not at once.
    got: list[hailq.Message] = []
    wait_for(lambda: got.extend(claims.receive(max_messages=5)) or len(got) == 2,
             timeout=5, what="both messages once claims is resumed")
    assert sorted(m.body for m in got) == [1, 2]


def test_configure_overrides_survive_a_declaration_and_reset_clears_them(
        hq_any: Hailq, api_any: hailq.Broker) -> None:
    api_any.queue("claims", lease=300, max_in_flight=4)
    shown = hq_any("configure", "claims", "--lease", "60", "--max-in-flight", "none",
                   "--json").json()
    assert shown["settings"]["lease"] == 60 and shown["settings"]["max_in_flight"] is None
    assert shown["overridden"] == ["lease", "max_in_flight"]
    api_any.queue("claims", lease=200, max_attempts=9)  # the next deploy
    [listed] = hq_any("queues", "--json").json()
    assert listed["settings"]["lease"] == 60 and listed["settings"]["max_attempts"] == 9
    assert listed["overridden"] == ["lease", "max_in_flight"]
    table = hq_any("configure", "claims").out  # no option: shows them
    assert "override" in table and "declared" in table
    reset = hq_any("configure", "claims", "--reset", "--json").json()
    assert reset["overridden"] == [] and reset["settings"]["lease"] == 200
    assert reset["settings"]["max_in_flight"] == 4


def test_configure_refuses_bad_values_and_changes_nothing(
        hq_any: Hailq, api_any: hailq.Broker) -> None:
    api_any.queue("claims", lease=30)
    for args in (["--lease", "-1"], ["--max-attempts", "0"], ["--aging", "soon"],
                 ["--on-dead", "explode"], ["--lease", "nan"]):
        hq_any("configure", "claims", *args).assert_clean_error(2)
    hq_any("configure", "nobody", "--lease", "5").assert_clean_error(1)
    assert api_any.get_queue("claims").overrides == {}


def test_rule_33_configure_sets_and_lifts_a_rate_limit_and_bad_rates_change_nothing(
        hq_any: Hailq, api_any: hailq.Broker) -> None:
    api_any.queue("results")
    shown = hq_any("configure", "results", "--rate", "20/s", "--burst", "4", "--json").json()
    assert (shown["settings"]["rate"], shown["settings"]["burst"]) == ("20/s", 4)
    assert api_any.get_queue("results").settings.rate == "20/s"  # what consumers read
    for args in (["--rate", "abc"], ["--rate", "0/s"], ["--burst", "0"]):
        hq_any("configure", "results", *args).assert_clean_error(2)
    assert api_any.get_queue("results").overrides == {"rate": "20/s", "burst": 4}
    lifted = hq_any("configure", "results", "--rate", "none", "--json").json()
    assert (lifted["settings"]["rate"], lifted["settings"]["burst"]) == (None, None)
    assert api_any.get_queue("results").settings.rate is None


def test_delete_is_refused_while_the_queue_holds_messages_unless_forced(
        hq_any: Hailq, api_any: hailq.Broker) -> None:
    kill_messages(api_any, "claims", [1], ["boom"])  # one dead message is enough
    line = hq_any("delete", "claims").assert_clean_error(1)
    assert "holds 1 message" in line and "force" in line
    assert api_any.get_queue("claims").stats().dead == 1
    result = hq_any("delete", "claims", "--force", "--json").json()
    assert result == {"queue": "claims", "deleted": True, "messages_deleted": 1}
    hq_any("delete", "claims").assert_clean_error(1)  # no such queue any more
    assert hq_any("queues", "--json").json() == []


def test_delete_topic_unsubscribe_and_a_deleted_subscription(
        hq_any: Hailq, api_any: hailq.Broker) -> None:
    topic = api_any.topic("orders.paid")
    for name in ("billing", "audit", "tax"):
        topic.subscribe(name)
    assert hq_any("unsubscribe", "orders.paid", "audit").code == 0
    hq_any("unsubscribe", "orders.paid", "audit").assert_clean_error(1)
    assert hq_any("delete", "tax").code == 0  # a subscription: it stops receiving copies
    [listed] = hq_any("topics", "--json").json()
    assert [s["subscription"] for s in listed["subscriptions"]] == ["billing"]
    hq_any("delete-topic", "orders.paid").assert_clean_error(1)
    removed = hq_any("delete-topic", "orders.paid", "--force", "--json").json()
    assert removed["subscriptions_removed"] == 1
    assert hq_any("topics", "--json").json() == []
    assert {q.name for q in api_any.queues()} == {"billing", "audit"}


def test_show_and_delete_message(hq_any: Hailq, api_any: hailq.Broker) -> None:
    [dead] = kill_messages(api_any, "claims", [{"claim": 8311}], ["decoder crashed"])
    shown = hq_any("show", "claims", dead, "--json").json()
    assert (shown["state"], shown["attempt"], shown["body"]) == ("dead", 1, {"claim": 8311})
    assert [e["error"] for e in shown["errors"]] == ["decoder crashed"]
    table = hq_any("show", "claims", dead).out
    assert "decoder crashed" in table and "dead" in table
    assert hq_any("delete-message", "claims", dead).code == 0
    hq_any("show", "claims", dead).assert_clean_error(1)
    hq_any("delete-message", "claims", dead).assert_clean_error(1)
    hq_any("show", "claims", "NOTANID").assert_clean_error(2)
    hq_any("delete-message", "claims", "NOTANID").assert_clean_error(2)
    stats = api_any.get_queue("claims").stats()
    assert (stats.sent, stats.acked, stats.dead) == (1, 0, 0)


def test_every_operator_command_has_help(hq: Hailq) -> None:
    for command in ("pause", "resume", "configure", "delete", "delete-topic",
                    "unsubscribe", "show", "delete-message"):
        result = hq(command, "--help")
        assert result.code == 0, result.err
        assert "--url" in result.out and "--json" in result.out


# -- send to a queue that does not exist ----------------------------------------------------


def test_send_to_an_unknown_queue_is_refused_without_create(
        hq: Hailq, sqlite_url: str) -> None:
    with hailq.connect(sqlite_url) as broker:
        broker.queue("claims")
    line = hq("send", "clams", "1").assert_clean_error(2)
    assert "no queue named 'clams'" in line and "--create" in line
    with hailq.connect(sqlite_url) as broker:
        assert [q.name for q in broker.queues()] == ["claims"]
    assert hq("send", "--create", "clams", "1").code == 0


def test_send_to_a_mistyped_database_path_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "clams.db"
    line = run_hailq("send", "claims", "1", url=f"sqlite:///{missing}").assert_clean_error(1)
    assert "no hailq database" in line
    assert not missing.exists()


# -- Ctrl-C during send --file --------------------------------------------------------------


def test_ctrl_c_during_send_file_says_what_was_committed_and_how_to_resume(
        sqlite_url: str, tmp_path: Path) -> None:
    path = tmp_path / "claims.jsonl"
    path.write_text("".join(json.dumps({"claim": n}) + "\n" for n in range(200_000)))
    with hailq.connect(sqlite_url) as broker:
        broker.queue("claims")
    env = {k: v for k, v in os.environ.items() if k != "HAILQ_URL"}
    process = subprocess.Popen(
        [sys.executable, "-m", "hailq.cli.main", "send", "claims", "--file", str(path),
         "--batch-size", "50", "--url", sqlite_url],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    with hailq.connect(sqlite_url) as broker:
        queue = broker.get_queue("claims")
        wait_for(lambda: queue.stats().sent >= 500 or process.poll() is not None, 60,
                 what="500 sent")
        assert process.poll() is None
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
        assert process.returncode == 130, err
        assert "Traceback" not in err
        assert "interrupted:" in err and "--skip" in err
        skip = int(err.rsplit("--skip ", 1)[1].split()[0].rstrip(";,."))
        committed = queue.stats().sent
        # Lines up to --skip are committed; a batch in flight adds at most 50 more.
        assert skip <= committed <= skip + 50
        small = tmp_path / "rest.jsonl"
        small.write_text("".join(json.dumps({"claim": n}) + "\n" for n in range(skip + 3)))
    result = run_hailq("send", "claims", "--file", str(small), "--skip", str(skip),
                       "--json", url=sqlite_url)
    assert result.json()["sent"] == 3


def test_ctrl_c_while_the_file_is_read_says_nothing_was_committed(url: str,
                                                                   tmp_path: Path) -> None:
    path = tmp_path / "claims.jsonl"
    os.mkfifo(path)  # the command waits for the rest of the file while it reads
    with hailq.connect(url) as broker:
        broker.queue("claims")
    env = {k: v for k, v in os.environ.items() if k != "HAILQ_URL"}
    process = subprocess.Popen(
        [sys.executable, "-m", "hailq.cli.main", "send", "claims", "--file", str(path),
         "--skip", "2", "--url", url],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    with open(path, "w") as writer:  # opens once the command opened the file to read it
        writer.write("".join(json.dumps({"claim": n}) + "\n" for n in range(10)))
        writer.flush()
        time.sleep(0.5)  # no event says the command has read them
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert "Traceback" not in err
    assert "0 message(s) committed" in err and "--skip 2 again" in err
    with hailq.connect(url) as broker:
        assert broker.get_queue("claims").stats().sent == 0


def test_skip_only_goes_with_file(hq: Hailq) -> None:
    hq("send", "--create", "claims", "1", "--skip", "3").assert_clean_error(2)


# -- worker targets written as paths ---------------------------------------------------------


def test_worker_target_written_as_a_file_says_what_to_write(hq: Hailq, sqlite_url: str,
                                                            tmp_path: Path) -> None:
    hailq.connect(sqlite_url).close()
    line = hq("worker", "app.py:app", cwd=tmp_path).assert_clean_error(2)
    assert "write app:app" in line
    line = hq("worker", "../dir/app:app", cwd=tmp_path).assert_clean_error(2)
    assert "PYTHONPATH=../dir hailq worker app:app" in line
