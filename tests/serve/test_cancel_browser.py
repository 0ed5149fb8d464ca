"""Rule 40 on the dashboard, in a real headless Chromium against a real server and a
real ``hailq worker`` process, on each backend: the message page's Cancel button
removes a waiting message and stops a running one's handler."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import hailq
from waiting import wait_for

from .conftest import READ, Server

pytestmark = pytest.mark.slow

SRC = str(Path(__file__).resolve().parents[2] / "src")  # this checkout's hailq, not another

APP = textwrap.dedent('''
    import time

    from hailq import App, HandlerCancelled

    app = App()

    @app.handler("jobs", lease=30)
    def work(message):
        with open("started.txt", "a") as out:
            out.write(f"{message.body}\\n")
        if message.body == "long":
            try:
                while True:
                    time.sleep(0.01)
            except HandlerCancelled:
                with open("stopped.txt", "a") as out:
                    out.write("long\\n")
                raise
        with open("done.txt", "a") as out:
            out.write(f"{message.body}\\n")
''')


def _lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def test_rule_40_cancel_by_click_removes_a_waiting_message_and_stops_a_running_one(
        open_page: Callable[..., Any], server: Server,
        broker: hailq.Broker, url: str, tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(APP)
    q = broker.queue("jobs", lease=30)
    env = {k: v for k, v in os.environ.items() if k not in ("HAILQ_URL", "PYTHONPATH")}
    env["PYTHONPATH"] = SRC
    log = (tmp_path / "worker.log").open("w")
    worker = subprocess.Popen([sys.executable, "-m", "hailq.cli.main", "worker", "app:app",
                               "--url", url], cwd=tmp_path, env=env, stdout=log,
                              stderr=subprocess.STDOUT)
    try:
        running = q.send("long")
        wait_for(lambda: _lines(tmp_path / "started.txt") == ["long"], 60,
                 "the worker to start the long handler")
        waiting = q.send("later", delay=3600)
        questions: list[str] = []

        def answer(dialog: Any) -> None:
            questions.append(dialog.message)
            dialog.accept()

        page = open_page(f"/queues/jobs/message?id={waiting}")
        page.on("dialog", answer)
        page.click("button:has-text('Cancel')")
        page.wait_for_url(f"{server.base}/queues/jobs")
        assert q.get_message(waiting) is None
        assert "It never starts." in questions[-1]

        page = open_page(f"/queues/jobs/message?id={running}")
        page.on("dialog", answer)
        assert page.locator("span.state").inner_text() == "leased"
        page.click("button:has-text('Cancel')")
        page.wait_for_url(f"{server.base}/queues/jobs")
        assert "handler is stopped within a second" in questions[-1]
        wait_for(lambda: _lines(tmp_path / "stopped.txt") == ["long"], 10,
                 "the cancelled handler to stop")
        wait_for(lambda: q.get_message(running) is None, 10, "the message to be let go")
        q.send("after")  # the worker goes on
        wait_for(lambda: _lines(tmp_path / "done.txt") == ["after"], 60,
                 "the worker to handle the next message")
        assert _lines(tmp_path / "started.txt") == ["long", "after"]
        assert worker.poll() is None
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(30)
        log.close()


def test_rule_40_the_read_role_sees_no_cancel_button(
        open_page: Callable[..., Any], broker: hailq.Broker) -> None:
    q = broker.queue("jobs")
    kept = q.send("work")
    page = open_page(f"/queues/jobs/message?id={kept}", token=READ)
    assert page.locator("button:has-text('Cancel')").count() == 0
    admin = open_page(f"/queues/jobs/message?id={kept}")
    assert admin.locator("button:has-text('Cancel')").count() == 1
