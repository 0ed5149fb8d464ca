"""Subscribers in the app (seed 004): ``@app.subscriber`` declares its topic's
subscription and consumes it; ``hailq declare`` stores an app's queues, subscriptions
and schedules before producers start (rule 19: a publish reaches only subscriptions
that exist). Both backends, through the real CLI and a real worker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import hailq
from hailq.runtime import App, Worker

from .support import wait_for

HERE = Path(__file__).resolve().parent
SRC = HERE.parent.parent / "src"


def test_a_subscriber_is_a_route_to_its_subscription_with_its_filter() -> None:
    app = App()

    @app.subscriber("claims-events", "audit", filter={"kind": "hail"}, lease=30)
    def audit(message: hailq.Message) -> None: ...

    route = app.route("audit")
    assert (route.topic, route.filter, route.settings) == ("claims-events", {"kind": "hail"},
                                                           {"lease": 30})
    assert route.handler is audit and app.queues == ["audit"]
    for bad in ({"kind": 3}, {}, "kind=hail"):
        with pytest.raises(hailq.InvalidArgument, match="filter"):
            app.subscriber("claims-events", "other", filter=bad)  # type: ignore[arg-type]
    with pytest.raises(hailq.InvalidArgument, match="topic name"):
        app.subscriber("no spaces", "other")
    with pytest.raises(hailq.InvalidArgument, match="already has a handler"):
        app.subscriber("claims-events", "audit")(print)
    assert app.queues == ["audit"]


def _declare(url: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, HAILQ_URL=url,
               PYTHONPATH=os.pathsep.join([str(HERE), str(SRC), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", "hailq.cli.main", "declare", *args,
                           "subscriber_app:app"], env=env, cwd=tmp_path, text=True,
                          capture_output=True, timeout=60)


def test_hailq_declare_stores_what_the_app_needs_before_anything_runs(
        url: str, tmp_path: Path) -> None:
    done = _declare(url, tmp_path, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "queues": ["claims", "audit"],
        "subscriptions": [{"topic": "claims-events", "subscription": "audit"}],
        "schedules": ["hourly-sweep"]}
    with hailq.connect(url) as broker:
        assert broker.get_queue("claims").settings.lease == 45
        assert broker.get_queue("audit").settings.max_attempts == 4
        topic = broker.get_topic("claims-events")
        [sub] = topic.subscriptions()
        assert (sub.queue, sub.filter) == ("audit", {"kind": ["hail", "storm"]})
        assert [s.name for s in broker.schedules()] == ["hourly-sweep"]
        # A producer that starts now reaches the subscription, filter and all.
        assert list(topic.publish({"claim": 4711}, headers={"kind": "storm"})) == ["audit"]
        assert topic.publish({"claim": 4712}, headers={"kind": "flood"}) == {}
    again = _declare(url, tmp_path)  # idempotent: the same things, nothing new
    assert again.returncode == 0, again.stderr
    assert "subscription audit of topic claims-events" in again.stdout
    with hailq.connect(url) as broker:
        assert broker.get_queue("audit").stats().ready == 1


def test_a_bad_target_fails_before_connecting(tmp_path: Path) -> None:
    missing = tmp_path / "none" / "hailq.db"
    done = subprocess.run([sys.executable, "-m", "hailq.cli.main", "declare",
                           "no_such_module_xyz:app"], env=dict(
                               os.environ, HAILQ_URL=f"sqlite:///{missing}",
                               PYTHONPATH=str(SRC)), cwd=tmp_path, text=True,
                          capture_output=True, timeout=60)
    assert done.returncode != 0 and "no_such_module_xyz" in done.stderr
    assert not missing.parent.exists()


def test_a_worker_declares_and_consumes_its_subscription(broker: hailq.Broker) -> None:
    app = App()
    seen: list[object] = []

    @app.subscriber("claims-events", "audit", filter={"kind": "hail"})
    def audit(message: hailq.Message) -> None:
        seen.append(message.body)

    worker = Worker(broker, app, poll=0.2)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        topic = broker.topic("claims-events")
        wait_for(lambda: [s.queue for s in topic.subscriptions()] == ["audit"],
                 what="the subscription declared by the worker")
        topic.publish({"claim": 1}, headers={"kind": "hail"})
        topic.publish({"claim": 2}, headers={"kind": "flood"})  # filtered out
        wait_for(lambda: seen == [{"claim": 1}], what="the subscriber's message")
    finally:
        worker.stop()
        thread.join(10)
    assert broker.get_queue("audit").stats().acked == 1
