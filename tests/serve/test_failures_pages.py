"""Readable failures on the dashboard and the API, on both backends: tracebacks as
preformatted text with hailq's frames folded, each distinct error of a message once,
dead letters grouped by error (count, first and last seen)."""

from __future__ import annotations

import html
import re

import httpx
import pytest
from markupsafe import escape

import hailq

from .conftest import ADMIN, READ, Server

HANDLER_FRAME = '  File "/app/billing.py", line 12, in charge'
TRACEBACK = "\n".join([
    "Traceback (most recent call last):",
    '  File "/venv/lib/python3.12/site-packages/hailq/runtime/worker.py", line 9, in _handle',
    "    call_handler(handler, message, services.loop, running)",
    '  File "/venv/lib/python3.12/site-packages/hailq/runtime/executor.py", line 74, in call',
    "    result = handler(message)",
    HANDLER_FRAME,
    "    raise ValueError(f'card <declined>: {card}')",
    "ValueError: card <declined>: 4242",
])
SIGNATURE = "ValueError: card <declined>: 4242"


@pytest.fixture
def page(server: Server) -> httpx.Client:
    return server.client(ADMIN)


def _fail(q: hailq.Queue, errors: list[str]) -> str:
    """Send one message and fail one attempt with each of ``errors``."""
    sent = q.send({"card": 4242})
    for error in errors:
        (m,) = q.receive(lease=30)
        m.nack(error=error, delay=0)
    return sent


def test_the_message_page_shows_each_distinct_error_once_as_preformatted_text(
        page: httpx.Client, broker: hailq.Broker) -> None:
    q = broker.queue("billing", max_attempts=4)
    sent = _fail(q, [TRACEBACK, TRACEBACK, TRACEBACK, "lease expired"])
    text = page.get(f"/queues/billing/message?id={sent}").text
    escaped = str(escape(HANDLER_FRAME))
    assert text.count(escaped) == 1  # three attempts, one traceback
    assert "attempts #1–#3" in text and "attempt #4" in text
    # The handler's frames and the exception in <pre>, hailq's two frames folded.
    pres = re.findall(r'<pre class="tb-(\w+)">(.*?)</pre>', text, re.S)
    assert ("frames", escaped + "\n" + str(escape("    raise ValueError(f'card <declined>: "
                                                 "{card}')"))) in pres
    assert ("text", str(escape(SIGNATURE))) in pres
    assert ("text", "lease expired") in pres
    fold = re.search(r'<details class="fold"><summary>(.*?)</summary><pre>(.*?)</pre>',
                     text, re.S)
    assert fold is not None and fold.group(1) == "2 hailq frames"
    assert "executor.py" in fold.group(2) and "billing.py" not in fold.group(2)


def test_the_dead_page_groups_dead_letters_by_error(page: httpx.Client,
                                                    broker: hailq.Broker) -> None:
    q = broker.queue("billing", max_attempts=2)
    ids = [_fail(q, [TRACEBACK, TRACEBACK]) for _ in range(4)]
    ids += [_fail(q, ["lease expired", "TimeoutError: slow"]) for _ in range(2)]
    dead = {d.id: d for d in q.dead_letters()}
    text = page.get("/queues/billing/dead").text
    groups = text.split('<table class="grid" id="groups">')[1].split("</table>")[0]
    rows = re.findall(r'<tr class="group"><td class="num">(\d+)</td>.*?<code[^>]*>(.*?)</code>',
                      groups, re.S)
    assert rows == [("4", str(escape(SIGNATURE))), ("2", "TimeoutError: slow")]
    assert groups.count(str(escape(HANDLER_FRAME))) == 1  # the example, once for four
    assert ids[0] in groups and ids[4] in groups
    # The dead letters' rows show the error's line, never the traceback again.
    letters = text.split('<table class="grid" id="dead">')[1]
    assert HANDLER_FRAME not in html.unescape(letters)
    assert letters.count(str(escape(SIGNATURE))) >= 4
    assert "+1 other error" in letters  # the lease expiry before the timeout
    # The same from the API, with first and last seen.
    found = page.get("/api/queues/billing/dead/groups").json()
    assert (found["scanned"], found["more"]) == (6, False)
    first = found["groups"][0]
    assert (first["error"], first["count"], first["example_id"]) == (SIGNATURE, 4, ids[0])
    assert first["first_seen"] == dead[ids[0]].errors[0].at
    assert first["last_seen"] == dead[ids[3]].errors[1].at
    assert first["example_error"] == TRACEBACK
    narrowed = page.get("/api/queues/billing/dead/groups", params={"error": "Timeout"}).json()
    assert [(g["error"], g["count"]) for g in narrowed["groups"]] == [("TimeoutError: slow", 2)]


def test_dead_groups_api_takes_the_read_role_and_checks_its_input(
        server: Server, broker: hailq.Broker) -> None:
    broker.queue("billing")
    reader = server.client(READ)
    assert reader.get("/api/queues/billing/dead/groups").json() == {
        "groups": [], "scanned": 0, "more": False}
    assert reader.get("/api/queues/nope/dead/groups").status_code == 404
    assert reader.get("/api/queues/billing/dead/groups",
                      params={"older_than": "-1"}).status_code == 400
    assert server.client(None).get("/api/queues/billing/dead/groups").status_code == 401
