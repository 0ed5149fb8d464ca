"""The HTTP guide's curl session runs as written against a real ``hailq serve``, on
both backends, and a 404 gives advice in the API's terms, as the guide shows."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import hailq
from ports import free_port
from waiting import wait_for

from .samples import blocks

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "http-api.md"
TOKEN = "docs-test-admin-token-0123456789"


def call(api: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    request = urllib.request.Request(
        api + path, method=method, data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)


@pytest.fixture
def api(url: str, tmp_path: Path) -> Iterator[str]:
    """A real ``hailq serve`` on the test's database; its base URL."""
    hailq.connect(url).close()  # the schema: serve opens only a database that has one
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("HAILQ_")}
    env["HAILQ_SERVE_TOKEN"] = TOKEN
    log = (tmp_path / "serve.log").open("w")
    server = subprocess.Popen([sys.executable, "-m", "hailq.cli.main", "serve", "--port",
                               str(port), "--url", url], env=env, stdout=log, stderr=log,
                              stdin=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        try:
            with urllib.request.urlopen(base + "/healthz", timeout=5):
                return True
        except OSError:
            assert server.poll() is None, (tmp_path / "serve.log").read_text()
            return False

    wait_for(answers, timeout=60, what="hailq serve to answer /healthz")
    yield base
    server.terminate()
    server.wait(30)
    log.close()


def documents(text: str) -> list[Any]:
    """The JSON documents printed one after another (curl adds no newline)."""
    decoder, found, at = json.JSONDecoder(), [], 0
    while at < len(text):
        if text[at].isspace():
            at += 1
            continue
        value, at = decoder.raw_decode(text, at)
        found.append(value)
    return found


def test_the_curl_session_runs_against_hailq_serve(api: str) -> None:
    (sample,) = [b for b in blocks(GUIDE) if b.apart == "http"]
    env = dict(os.environ, HAILQ_API=api, HAILQ_TOKEN=TOKEN)
    done = subprocess.run(["bash", "-e", "-c", sample.code], env=env, capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout + done.stderr
    declared, sent, received, acked = documents(done.stdout)
    # Each answer has the shape the comment below its command shows.
    shown = re.findall(r'^# \{"(\w+)"', sample.code, flags=re.MULTILINE)
    assert shown == [next(iter(d)) for d in (declared, sent, received, acked)]
    assert declared["name"] == "emails" and declared["settings"]["lease"] == 60
    (message,) = received["messages"]
    assert sent["ids"] == [message["id"]] and message["body"] == {"to": "ada@example.com"}
    assert acked["results"] == [{"receipt": message["receipt"], "acked": True, "late": False}]


def test_a_404_gives_advice_in_the_apis_terms(api: str) -> None:
    (shown,) = re.findall(r'^(\{"error": .*\})$', GUIDE.read_text(), flags=re.MULTILINE)
    status, answer = call(api, "POST", "/api/queues/emails/messages", {"body": 1})
    assert status == 404 and answer == json.loads(shown)
    status, answer = call(api, "POST", "/api/topics/alerts/publish", {"body": 1})
    assert status == 404
    assert answer["error"]["message"] == ("no topic named 'alerts'; an admin declares it "
                                          "with PUT /api/topics/alerts")
    assert call(api, "PUT", "/api/topics/alerts", {})[0] == 200
    status, answer = call(api, "DELETE", "/api/topics/alerts/subscriptions/audit")
    assert status == 404
    assert answer["error"]["message"].endswith("GET /api/topics lists them")
    assert call(api, "GET", "/api/queues")[1]["queues"] == []  # nothing was made
