"""The worker as a process: idle cost, the process pool, and command-line mistakes."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import hailq

from .conftest import HERE, SRC, StartWorker
from .support import cpu_share, done, started, wait_for

CLAIMS = {"lease": 2, "max_attempts": 3, "retry": {"base": 0.05, "jitter": 0}}


@pytest.mark.parametrize("target", [
    ["handlers:work", "--queue", "claims"],
    ["handlers:order_app", "--queue", "high", "--queue", "low", "--concurrency", "8"],
    ["handlers:order_app", "--weights", "high=3,low=1", "--concurrency", "8"],
], ids=["one-queue", "two-queues-in-turns", "weighted-two-queues"])
def test_an_idle_worker_uses_under_2_percent_cpu(
        broker: hailq.Broker, start_worker: StartWorker, target: list[str]) -> None:
    worker = start_worker(*target)
    wait_for(lambda: [w for w in broker.workers() if w.pid == worker.pid],
             what="the worker to start")
    time.sleep(1.0)
    share = cpu_share(worker.pid, 3.0)
    assert share < 0.02, f"idle worker used {share:.1%} of a CPU"


def test_an_idle_worker_wakes_up_for_new_work(
        broker: hailq.Broker, start_worker: StartWorker, effects: str) -> None:
    worker = start_worker("handlers:order_app", "-q", "high", "-q", "low")
    wait_for(lambda: [w for w in broker.workers() if w.pid == worker.pid],
             what="the worker to start")
    time.sleep(1.5)
    for name in ("low", "high"):
        sent = time.monotonic()
        broker.queue(name).send({"n": 1})
        wait_for(lambda q=name: started(effects, q), timeout=5, what=f"a wake-up on {name}")
        assert time.monotonic() - sent < 1.5


def _start_pool(broker: hailq.Broker, start_worker: StartWorker
                ) -> tuple[hailq.Queue, subprocess.Popen[str], set[int]]:
    """A pool of two children on "claims", running: the queue, the supervisor, the pids."""
    claims = broker.queue("claims", **CLAIMS)
    parent = start_worker("handlers:app", "-q", "claims", "--pool", "process",
                          "--concurrency", "2", "--grace", "20")
    children = wait_for(lambda: len(broker.workers()) == 2 and
                        broker.workers(), timeout=60, what="two children")
    return claims, parent, {w.pid for w in children}


def test_process_pool_runs_children_that_drain_on_sigterm(
        broker: hailq.Broker, start_worker: StartWorker, effects: str) -> None:
    claims, parent, pids = _start_pool(broker, start_worker)
    assert parent.pid not in pids
    claims.send_many([{"n": n, "sleep": 0.2} for n in range(20)])
    wait_for(lambda: len(done(effects)) == 20, timeout=60, what="the pool to finish")
    assert {pid for *_, pid in started(effects)} == pids

    claims.send({"n": 99, "sleep": 1.5})
    wait_for(lambda: started(effects, "claims")[-1][0] == 99, what="the last handler")
    parent.send_signal(signal.SIGTERM)
    assert parent.wait(30) == 0
    assert 99 in done(effects)  # the child finished its in-flight work before exiting
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists()
    children = [w for w in broker.workers() if w.pid in pids]
    assert len(children) == 2 and {w.state for w in children} == {"stopped"}


def test_ctrl_c_on_the_process_group_drains_the_pool_once(
        broker: hailq.Broker, start_worker: StartWorker, effects: str) -> None:
    claims = broker.queue("claims", **CLAIMS)
    claims.send_many([{"n": n, "sleep": 2.0} for n in range(2)])
    parent = start_worker("handlers:app", "-q", "claims", "--pool", "process",
                          "--concurrency", "2", "--grace", "20")
    wait_for(lambda: len(started(effects)) == 2, timeout=30, what="both children to start")
    os.killpg(parent.pid, signal.SIGINT)  # a terminal's Ctrl-C reaches every process
    assert parent.wait(30) == 0
    # One interrupt drains: both handlers finished instead of being given back.
    assert done(effects) == [0, 1]
    assert claims.stats().ready == 0


def _run_cli(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, HAILQ_URL=url,
               PYTHONPATH=os.pathsep.join([str(HERE), str(SRC)]))
    return subprocess.run([sys.executable, "-m", "hailq.cli.worker", *args], env=env,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(("args", "code", "says"), [
    (["handlers:work"], 2, "--queue"),
    (["handlers:app", "-q", "claims", "--weights", "claims=1"], 2, "not both"),
    (["handlers:app", "-q", "nobody"], 2, "no handler for queue 'nobody'"),
    (["handlers:app", "--weights", "claims=x"], 2, "integer"),
    (["handlers:nothing_here"], 2, "no attribute"),
    (["not-a-target"], 2, "module:function"),
    (["handlers:app", "--concurrency", "0"], 2, "concurrency"),
    (["handlers:app", "--pool", "process", "--concurrency", "300"], 2, "at most 256"),
    (["handlers:app", "--poll", "nan"], 2, "not a finite number"),
    (["handlers:app", "--grace", "nan"], 2, "not a finite number"),
    (["broken_at_import:app"], 2, "fails as it is imported: ZeroDivisionError"),
])
def test_command_line_mistakes_fail_clearly(sqlite_url: str, args: list[str], code: int,
                                            says: str) -> None:
    result = _run_cli(sqlite_url, *args)
    assert sqlite_url.endswith("hailq.db")
    assert not Path(sqlite_url.removeprefix("sqlite:///")).exists()  # refused before it opens
    assert result.returncode == code, result.stderr
    assert says in result.stderr
    assert "Traceback" not in result.stderr


def _gone(pid: int) -> bool:
    """The process has exited (reaped, or a zombie waiting for whoever adopted it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_children_of_a_killed_supervisor_drain_and_stop(
        broker: hailq.Broker, start_worker: StartWorker, effects: str) -> None:
    claims, parent, pids = _start_pool(broker, start_worker)
    claims.send({"n": 1, "sleep": 2.0})
    wait_for(lambda: started(effects, "claims"), what="a handler to start")
    parent.send_signal(signal.SIGKILL)  # forwards nothing to its children
    parent.wait(10)
    # Unsupervised children would consume on beside a replacement pool: they stop.
    try:
        wait_for(lambda: all(_gone(pid) for pid in pids), timeout=30,
                 what="the orphaned children to stop")
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert done(effects) == [1]  # the one in flight finished first (a drain)
    states = {w.state for w in broker.workers() if w.pid in pids}
    assert states == {"stopped"}
    claims.send({"n": 2})
    time.sleep(0.5)  # the scenario: a moment in which a consumer left over would take it
    assert claims.stats().ready == 1  # nobody consumes any more


@pytest.mark.parametrize("backend_name", ["sqlite"])  # the supervisor's own behaviour
def test_a_poison_message_that_kills_children_never_stops_the_pool(
        broker: hailq.Broker, start_worker: StartWorker, effects: str) -> None:
    # More quick deaths in a row than the old give-up rule allowed (5): the poison's 6
    # attempts each kill the only child within a second of its start.
    poison = broker.queue("poison", lease=0.5, max_attempts=6,
                          retry={"base": 0.05, "jitter": 0})
    poison_id = poison.send({"n": 0, "exit": True})
    parent = start_worker("handlers:poison_app", "--pool", "process", "--concurrency", "1",
                          "--grace", "5")
    wait_for(lambda: parent.poll() is not None or poison.stats().dead == 1, timeout=120,
             what="the poison to die")
    assert parent.poll() is None, "the supervisor gave up"
    (dead,) = poison.dead_letters()
    assert dead.id == poison_id and dead.attempt == 6
    poison.send_many([{"n": n} for n in range(1, 6)])
    wait_for(lambda: sorted(done(effects)) == [1, 2, 3, 4, 5], timeout=30,
             what="the restarted child to take the rest")
    parent.send_signal(signal.SIGTERM)
    assert parent.wait(30) == 0


def _children_of(pid: int) -> set[int]:
    try:
        return {int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()}
    except FileNotFoundError:
        return set()


@pytest.mark.parametrize("backend_name", ["sqlite"])  # the supervisor's own behaviour
def test_children_of_a_supervisor_killed_while_they_start_stop_too(
        start_worker: StartWorker) -> None:
    parent = start_worker("handlers:app", "-q", "claims", "--pool", "process",
                          "--concurrency", "2")
    pids = wait_for(lambda: len(_children_of(parent.pid)) >= 2 and _children_of(parent.pid),
                    timeout=30, what="two children to be spawned")
    parent.send_signal(signal.SIGKILL)  # before they can have looked up their parent
    parent.wait(10)
    try:
        wait_for(lambda: all(_gone(pid) for pid in pids), timeout=30,
                 what="the children of a supervisor killed at their start to stop")
    finally:
        for pid in pids:  # whatever happened, leave no orphan behind
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
