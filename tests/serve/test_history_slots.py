"""Rule 40 (issue "Operate it like the best job dashboards", point 1): each claim by a
worker records the worker and the slot that runs the message, and history shows it in
``Queue.finished``/``broker.history``, ``hailq history``, ``GET /api/history`` and the
dashboard's history page. A real worker process of two slots, on both backends."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from itertools import pairwise
from pathlib import Path

import httpx

import hailq
from waiting import wait_for

from .conftest import Server

ROOT = Path(__file__).resolve().parents[2]
HANDLERS = '''
import time

from hailq.runtime import App

app = App("slots")


@app.handler("claims")
def check(message):
    time.sleep(message.body["sleep"])
'''


def test_rule_40_each_attempt_names_the_worker_and_the_slot_that_ran_it(
        server: Server, broker: hailq.Broker, url: str, admin: httpx.Client,
        tmp_path: Path) -> None:
    q = broker.queue("claims", retain="1h")
    # The first claim takes the first two, one per slot; the first runs long, so the
    # others run one after the other in the other slot (or, under load, in either).
    ids = q.send_many([{"claim": 4700 + n, "sleep": 1.5 if n == 0 else 0.1}
                       for n in range(8)])
    (tmp_path / "slot_handlers.py").write_text(HANDLERS)
    env = {k: v for k, v in os.environ.items() if k != "HAILQ_URL"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(tmp_path)])
    worker = subprocess.Popen(
        [sys.executable, "-m", "hailq.cli.main", "worker", "slot_handlers:app", "-q",
         "claims", "--concurrency", "2", "--url", url], env=env, cwd=tmp_path,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: len(broker.history(queue="claims")) == 8, 120, "eight finished")
    finally:
        worker.send_signal(signal.SIGTERM)
        _, err = worker.communicate(timeout=60)
    assert worker.returncode == 0, err

    found = broker.history(queue="claims")
    assert {e.id for e in found} == set(ids)
    (worker_id,) = [w.id for w in broker.workers()]
    spans: dict[str, list[tuple[float, float]]] = {}
    for e in found:
        (attempt,) = e.attempts
        assert attempt.consumer == e.consumer
        assert attempt.started_at is not None
        spans.setdefault(str(e.consumer), []).append((attempt.started_at, attempt.ended_at))
    assert set(spans) == {f"worker {worker_id} slot 1", f"worker {worker_id} slot 2"}
    # The first message in the lowest slot; a slot runs one message at a time, so
    # names swapped between the two messages of a claim would overlap here.
    assert q.finished(ids[0]).consumer == f"worker {worker_id} slot 1"  # type: ignore[union-attr]
    for runs in spans.values():
        runs.sort()
        assert all(later[0] >= earlier[1] - 0.1
                   for earlier, later in pairwise(runs)), runs
    one = q.finished(ids[0])
    assert one is not None and one.consumer in spans

    # The CLI, the API and the dashboard's page show the same names.
    shown = subprocess.run([sys.executable, "-m", "hailq.cli.main", "history", "claims",
                            "--json", "--url", url], env=env, capture_output=True,
                           text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert shown.returncode == 0, shown.stderr
    assert {r["id"]: r["consumer"] for r in json.loads(shown.stdout)} == \
        {e.id: e.consumer for e in found}
    api = admin.get("/api/history", params={"queue": "claims"}).json()["messages"]
    assert {m["id"]: m["attempts"][0]["consumer"] for m in api} == \
        {e.id: e.consumer for e in found}
    page = admin.get("/history", params={"queue": "claims"})
    assert page.status_code == 200
    assert f"worker {worker_id} slot 1" in page.text
    assert f"worker {worker_id} slot 2" in page.text
