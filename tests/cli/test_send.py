"""``hailq send``: bodies, options, JSONL files; the queue is declared on first send."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import hailq

from .conftest import Hailq


def peek(hq: Hailq, queue: str) -> list[dict[str, object]]:
    return hq("peek", queue, "--json", "--limit", "1000").json()  # type: ignore[no-any-return]


def test_send_declares_the_queue_and_prints_the_id(hq_any: Hailq,
                                                   api_any: hailq.Broker) -> None:
    result = hq_any("send", "--create", "claims", '{"claim": 8311}')
    assert result.code == 0, result.err
    message_id = result.out.strip()
    (message,) = api_any.get_queue("claims").receive()
    assert message.id == message_id
    assert message.body == {"claim": 8311}


def test_send_json_reports_queue_and_id(hq_any: Hailq) -> None:
    sent = hq_any("send", "--create", "claims", "[1, 2]", "--json").json()
    assert sent["queue"] == "claims"
    (message,) = peek(hq_any, "claims")
    assert message["id"] == sent["id"]
    assert message["body"] == [1, 2]
    assert message["body_encoding"] == "json"


def test_send_options_reach_the_message(hq: Hailq) -> None:
    hq("send", "--create", "claims", "1", "--priority", "7", "--ordering-key", "policy-9",
       "-H", "source=web", "-H", "trace=a=b", "--json").json()
    (message,) = peek(hq, "claims")
    assert message["priority"] == 7
    assert message["ordering_key"] == "policy-9"
    assert message["headers"] == {"source": "web", "trace": "a=b"}
    assert message["state"] == "ready"


def test_delayed_message_is_scheduled(hq: Hailq) -> None:
    hq("send", "--create", "claims", "1", "--delay", "600")
    (message,) = peek(hq, "claims")
    assert message["state"] == "scheduled"
    assert hq("queues", "--json").json()[0]["scheduled"] == 1


def test_dedup_id_sends_once(hq: Hailq) -> None:
    first = hq("send", "--create", "claims", "1", "--dedup-id", "claim-8311").out
    second = hq("send", "--create", "claims", "2", "--dedup-id", "claim-8311").out
    assert first == second
    assert len(peek(hq, "claims")) == 1


def test_text_and_raw_bodies(hq: Hailq) -> None:
    hq("send", "--create", "notes", "hello world", "--text")
    hq("send", "--create", "notes", "héllo", "--raw")
    text, raw = peek(hq, "notes")
    assert text["body"] == "hello world"
    assert raw["body_encoding"] == "base64"
    assert base64.b64decode(str(raw["body"])) == "héllo".encode()


def test_body_from_stdin(hq: Hailq) -> None:
    assert hq("send", "--create", "claims", "-", stdin='{"from": "stdin"}').code == 0
    assert peek(hq, "claims")[0]["body"] == {"from": "stdin"}


def test_file_of_plain_bodies_uses_command_line_options(hq: Hailq, tmp_path: Path) -> None:
    source = tmp_path / "msgs.jsonl"
    source.write_text('{"n": 1}\n\n"two"\n3\n')
    result = hq("send", "--create",
                "claims", "--file", str(source), "--priority", "4", "--json").json()
    assert result["sent"] == 3
    messages = peek(hq, "claims")
    assert [m["body"] for m in messages] == [{"n": 1}, "two", 3]
    assert {m["priority"] for m in messages} == {4}
    assert [m["id"] for m in messages] == result["ids"]


def test_file_of_envelopes_overrides_options(hq: Hailq, tmp_path: Path) -> None:
    source = tmp_path / "msgs.jsonl"
    lines = [{"body": {"n": 1}, "priority": 9, "headers": {"kind": "urgent"}},
             {"body": {"n": 2}, "ordering_key": "k", "dedup_id": "d"},
             {"body": {"n": 3}, "dedup_id": "d"}]
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = hq("send", "--create",
                "claims", "--file", str(source), "--envelopes", "-H", "src=file")
    assert result.code == 0, result.err
    assert "sent 3 message(s) to claims" in result.out
    first, second = peek(hq, "claims")  # the third was a duplicate
    assert first["priority"] == 9
    assert first["headers"] == {"kind": "urgent", "src": "file"}
    assert second["ordering_key"] == "k"
    assert second["headers"] == {"src": "file"}


def test_file_is_sent_in_batches(hq: Hailq, tmp_path: Path) -> None:
    source = tmp_path / "msgs.jsonl"
    source.write_text("".join(f"{n}\n" for n in range(1201)))
    result = hq("send", "--create",
                "bulk", "--file", str(source), "--batch-size", "500", "--json").json()
    assert result["sent"] == 1201
    assert len(set(result["ids"])) == 1201
    assert hq("stats", "bulk", "--json").json()["queues"][0]["ready"] == 1201


def test_file_from_stdin_as_raw_lines(hq: Hailq) -> None:
    assert hq("send", "--create", "logs", "--file", "-", "--raw", stdin="a b\nc\n").code == 0
    bodies = [base64.b64decode(str(m["body"])) for m in peek(hq, "logs")]
    assert bodies == [b"a b", b"c"]


def test_a_bad_line_sends_nothing(hq: Hailq, tmp_path: Path) -> None:
    source = tmp_path / "msgs.jsonl"
    source.write_text("1\n2\n{not json\n")
    line = hq("send", "--create", "claims", "--file", str(source)).assert_clean_error()
    assert "line 3" in line
    assert hq("send", "--create", "other", "1").code == 0  # creates the database, not "claims"
    assert [q["queue"] for q in hq("queues", "--json").json()] == ["other"]


def test_a_bad_envelope_sends_nothing(hq: Hailq, tmp_path: Path) -> None:
    hq("send", "--create", "claims", "0")
    source = tmp_path / "msgs.jsonl"
    source.write_text('{"body": 1}\n{"body": 2, "priority": 12}\n')
    line = hq("send", "--create",
              "claims", "--file", str(source), "--envelopes").assert_clean_error()
    assert "line 2" in line and "priority" in line
    source.write_text('{"body": 1}\n{"body": 2, "colour": "red"}\n')
    line = hq("send", "--create",
              "claims", "--file", str(source), "--envelopes").assert_clean_error()
    assert "colour" in line
    assert len(peek(hq, "claims")) == 1


def test_body_and_file_are_exclusive(hq: Hailq, tmp_path: Path) -> None:
    source = tmp_path / "msgs.jsonl"
    source.write_text("1\n")
    hq("send", "--create", "claims", "1", "--file", str(source)).assert_clean_error()
    hq("send", "--create", "claims").assert_clean_error()
    hq("send", "--create", "claims", "1", "--envelopes").assert_clean_error()
    hq("send", "--create", "claims", "--file", str(source), "--dedup-id", "x").assert_clean_error()
    hq("send", "--create", "claims", "--file", str(tmp_path / "missing.jsonl")).assert_clean_error()


def test_file_send_shows_a_progress_bar_on_a_terminal(sqlite_url: str, tmp_path: Path) -> None:
    import os
    import pty
    import subprocess
    import sys
    import threading

    path = tmp_path / "claims.jsonl"
    path.write_text("".join(json.dumps({"claim": n}) + "\n" for n in range(3000)))
    hailq.connect(sqlite_url).close()
    leader, follower = pty.openpty()  # stderr is a terminal: the bar shows
    env = {k: v for k, v in os.environ.items() if k != "HAILQ_URL"} | {"COLUMNS": "100"}
    chunks: list[bytes] = []

    def read_terminal() -> None:  # read while it writes, so a full terminal never blocks it
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal closed: everything written was read
                return
            if not chunk:
                return
            chunks.append(chunk)

    reader = threading.Thread(target=read_terminal)
    reader.start()
    done = subprocess.run([sys.executable, "-m", "hailq.cli.main", "send", "--create",
                          "claims", "--file",
                           str(path), "--batch-size", "100", "--url", sqlite_url],
                          stdout=subprocess.PIPE, stderr=follower, env=env, timeout=120)
    os.close(follower)
    reader.join(10)
    os.close(leader)
    seen = b"".join(chunks)
    assert done.returncode == 0
    text = seen.decode("utf-8", "replace")
    assert "sending to claims" in text
    assert "/3000" in text  # done/total, counting up
    with hailq.connect(sqlite_url) as broker:
        assert broker.queue("claims").stats().ready == 3000
