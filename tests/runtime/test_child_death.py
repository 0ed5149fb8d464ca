"""A ``--pool process`` child that dies names the messages it held: in the supervisor's
log line, and in each message's error (nacked at once, so the attempt counts)."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest

import hailq
from hailq.policy.autoscale import Limits
from hailq.runtime.autoscaler import Autoscaler
from hailq.runtime.supervisor import ProcessPool, WorkerSpec

from .conftest import StartWorker
from .support import done, started, wait_for

SEGV = "worker process exited with signal 11 (SIGSEGV) while handling it"


def _log(tmp_path: Path) -> str:
    return (tmp_path / "worker0.log").read_text()


def test_a_segfault_fails_every_message_the_child_held_with_its_cause(
        url: str, broker: hailq.Broker, effects: str, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """One child with two slots (the API's ProcessPool; the CLI's children have one):
    the poison's segfault fails both messages the child held, each with the signal."""
    monkeypatch.setenv("HAILQ_TEST_EFFECTS", effects)
    spec = WorkerSpec(url, "death_handlers:app", queues=("steady", "fragile"), concurrency=2,
                      grace=5, poll=0.2)
    pool = ProcessPool(spec, 1)
    caplog.set_level(logging.WARNING, "hailq.worker")
    runner = threading.Thread(target=pool.run, kwargs={"handle_signals": False})
    runner.start()
    try:
        wait_for(broker.workers, timeout=60, what="the child to start")
        steady, fragile = broker.get_queue("steady"), broker.get_queue("fragile")
        held = steady.send({"n": 1, "sleep_first": 60})
        wait_for(lambda: started(effects, "steady"), timeout=60, what="the steady handler")
        poison = fragile.send({"n": 2, "kill": "SIGSEGV"})
        wait_for(lambda: fragile.stats().dead == 1, timeout=60, what="the poison to die")
        # The message held beside it failed its attempt with the same cause, then succeeded.
        wait_for(lambda: done(effects) == [1], timeout=30, what="the held message")
    finally:
        pool.stop()
        runner.join(60)
    # Both attempts ended with the signal, long before a 60 s lease could have.
    [dead] = fragile.dead_letters()
    assert dead.id == poison and dead.attempt == 2
    assert [e.error for e in dead.errors] == [SEGV, SEGV]
    assert [a for (_, a, *_) in started(effects, "steady")] == [1, 2]
    assert pool.crashes == 2
    deaths = [r.getMessage() for r in caplog.records if "exited with signal 11" in r.getMessage()]
    assert "while handling 2 message(s)" in deaths[0], deaths
    assert f"steady/{held} (attempt 1)" in deaths[0]
    assert f"fragile/{poison} (attempt 1)" in deaths[0]
    assert "while handling 1 message(s): fragile/" in deaths[1]


def test_a_sigkilled_child_dead_letters_its_last_attempt_with_the_signal(
        broker: hailq.Broker, start_worker: StartWorker, effects: str,
        tmp_path: Path) -> None:
    start_worker("death_handlers:app", "-q", "once", "--pool", "process")
    wait_for(broker.workers, timeout=60, what="the child to start")
    once = broker.get_queue("once")
    sent = once.send({"n": 3, "kill": "SIGKILL"})
    wait_for(lambda: once.stats().dead == 1, timeout=60, what="the message to die")
    found = once.get_message(sent)
    assert found is not None and found.state == "dead"
    assert [e.error for e in found.errors] == [
        "worker process exited with signal 9 (SIGKILL) while handling it"]
    line = next(line for line in _log(tmp_path).splitlines() if "exited with" in line)
    assert f"exited with signal 9 (SIGKILL) while handling 1 message(s): once/{sent} " \
           "(attempt 1); restarting it" in line
    # The restarted child works on.
    once.send({"n": 4})
    wait_for(lambda: done(effects) == [4], timeout=60, what="the next message")


def test_an_autoscalers_child_that_dies_fails_the_message_it_held(
        url: str, broker: hailq.Broker, effects: str, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("HAILQ_TEST_EFFECTS", effects)
    spec = WorkerSpec(url, "death_handlers:app", grace=5, poll=0.2)
    scaler = Autoscaler(broker, spec, "once", Limits(1, 1), interval=0.5)
    caplog.set_level(logging.WARNING, "hailq.autoscale")
    runner = threading.Thread(target=scaler.run, kwargs={"handle_signals": False})
    runner.start()
    try:
        wait_for(broker.workers, timeout=60, what="the child to start")
        once = broker.get_queue("once")
        sent = once.send({"n": 5, "kill": "SIGSEGV"})
        wait_for(lambda: once.stats().dead == 1, timeout=60, what="the message to die")
    finally:
        scaler.stop()
        runner.join(60)
    assert [e.error for e in once.dead_letters()[0].errors] == [SEGV]
    assert any(f"signal 11 (SIGSEGV) while handling 1 message(s): once/{sent} (attempt 1)"
               in r.getMessage() for r in caplog.records)
