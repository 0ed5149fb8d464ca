"""Time limits per handler in real worker processes, on both pools (SPEC rules 13, 34)."""

from __future__ import annotations

import itertools
import signal
import threading
import time
from pathlib import Path

import pytest

import hailq
from hailq.runtime import App, Worker
from hailq.runtime.timelimit import Running, Watchdog
from waiting import wait_past

from .conftest import StartWorker
from .support import done, rows, started, wait_for

LIMITED = {"lease": 2, "max_attempts": 3, "retry": {"base": 0.05, "jitter": 0}}
POOLS = ["thread", "process"]


def _most_at_once(effects: str, numbers: range) -> int:
    """The most handlers of these messages that ran at the same time (start to effect)."""
    spans = rows(effects, "SELECT e.at, f.at FROM events e JOIN effects f USING (message_id) "
                          f"WHERE e.n BETWEEN {numbers.start} AND {numbers.stop - 1}")
    edges = sorted(itertools.chain.from_iterable(((a, 1), (b, -1)) for a, b in spans))
    running = most = 0
    for _, step in edges:
        running += step
        most = max(most, running)
    return most


def _past_the_first_attempt(effects: str, seconds: float) -> None:
    """Wait until message 1's first attempt would have ended its ``seconds`` of work, and
    a moment more for the effect it would then write (its start is in the events)."""
    ((began,),) = rows(effects, "SELECT at FROM events WHERE n = 1 AND attempt = 1")
    wait_past(time.time, began + seconds + 0.3)


@pytest.mark.parametrize("pool", POOLS)
def test_rule_34_a_handler_past_its_time_limit_dies_with_time_limit_errors_while_others_flow(
        broker: hailq.Broker, start_worker: StartWorker, effects: str, pool: str,
        tmp_path: Path) -> None:
    limited = broker.queue("limited", **LIMITED)
    stuck = limited.send({"n": 0, "sleep": 30})  # time.sleep: not interruptible in a thread
    limited.send_many([{"n": n, "sleep": 0.05} for n in range(1, 21)])
    worker = start_worker("handlers:limits_app", "-q", "limited", "--pool", pool,
                          "--concurrency", "2", "--grace", "2", log_name="worker-limits.log")
    (dead,) = wait_for(limited.dead_letters, timeout=60, what="the stuck message to die")
    wait_for(lambda: len(done(effects)) == 20, timeout=60, what="the others to be done")
    assert dead.id == stuck and dead.attempt == 3
    assert len(dead.errors) == 3
    for attempt in dead.errors:
        assert "time limit (1 s) exceeded" in attempt.error
        assert "lease" not in attempt.error
    assert [a for n, a, *_ in started(effects) if n == 0] == [1, 2, 3]

    # Both slots still work: four handlers of 0.8 s run two at a time.
    limited.send_many([{"n": n, "sleep": 0.8} for n in range(30, 34)])
    wait_for(lambda: len(done(effects)) == 24, timeout=60, what="the next four")
    assert _most_at_once(effects, range(30, 34)) == 2
    # A handler's effect lands before its ack commits (a few ms later): wait for the
    # acks, well within the 2 s lease, so a lost ack cannot hide behind a redelivery.
    wait_for(lambda: (lambda s: (s.ready, s.in_flight, s.dead) == (0, 0, 1))(limited.stats()),
             timeout=1.0, what="the last acks, nothing ready or in flight, one dead")
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    log = (tmp_path / "worker-limits.log").read_text()
    assert "failed on attempt 1 of 3: time limit (1 s) exceeded" in log
    assert "failed on attempt 3 of 3, its last, and is dead-lettered: time limit (1 s)" in log
    if pool == "process":
        assert "ended itself after a handler's time limit; starting another" in log
        assert "3 ended by a time limit" in log and "0 crashed" in log


@pytest.mark.parametrize("pool", POOLS)
def test_rule_34_a_handler_under_its_time_limit_is_unaffected(
        broker: hailq.Broker, start_worker: StartWorker, effects: str, pool: str) -> None:
    limited = broker.queue("limited", **LIMITED)
    limited.send_many([{"n": n, "sleep": 0.6} for n in range(4)])
    worker = start_worker("handlers:limits_app", "-q", "limited", "--pool", pool,
                          "--concurrency", "2")
    wait_for(lambda: len(done(effects)) == 4, timeout=60, what="the four messages")
    assert [a for _, a, *_ in started(effects)] == [1, 1, 1, 1]
    stats = limited.stats()
    assert (stats.nacked, stats.dead, stats.redelivered) == (0, 0, 0)
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(30) == 0


@pytest.mark.parametrize("backend_name", ["sqlite"])  # how a thread is stopped, not storage
@pytest.mark.parametrize("body", [{"n": 1, "sleep_first": 2.5}, {"n": 1, "spin_first": 2.5}],
                         ids=["blocking-sleep", "python-loop"])
def test_rule_34_the_timed_out_attempt_never_finishes_its_work_and_the_retry_does(
        broker: hailq.Broker, start_worker: StartWorker, effects: str,
        body: dict[str, object]) -> None:
    limited = broker.queue("limited", **LIMITED)
    limited.send(body)
    start_worker("handlers:limits_app", "-q", "limited", "--concurrency", "1")
    wait_for(lambda: done(effects), timeout=30, what="the second attempt")
    # the scenario: the first attempt's thread has left its sleep or loop (2.5 s from
    # its start), and would have written its effect by now had it not been stopped
    _past_the_first_attempt(effects, 2.5)
    assert rows(effects, "SELECT n, attempt FROM effects") == [(1, 2)]
    assert [a for _, a, *_ in started(effects)] == [1, 2]
    stats = limited.stats()
    assert (stats.nacked, stats.dead, stats.late_acks) == (1, 0, 0)


@pytest.mark.parametrize("pool", POOLS)
def test_rule_34_an_async_handler_past_its_time_limit_is_cancelled(
        broker: hailq.Broker, start_worker: StartWorker, effects: str, pool: str) -> None:
    queue = broker.queue("limited-async", **LIMITED)
    queue.send({"n": 1, "sleep_first": 3})
    queue.send({"n": 2, "sleep": 30})
    worker = start_worker("handlers:limits_app", "-q", "limited-async", "--pool", pool,
                          "--concurrency", "2")
    (dead,) = wait_for(queue.dead_letters, timeout=60, what="the endless one to die")
    wait_for(lambda: done(effects), timeout=30, what="the retried one")
    _past_the_first_attempt(effects, 3)  # the scenario: its sleep would have ended
    # The cancelled first attempt never reached its effect; the second did.
    assert rows(effects, "SELECT n, attempt FROM effects") == [(1, 2)]
    assert all("time limit (1 s) exceeded" in e.error for e in dead.errors)
    assert len(dead.errors) == 3
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(30) == 0


@pytest.mark.parametrize("pool", POOLS)
def test_rule_34_the_workers_time_limit_applies_to_handlers_without_their_own(
        broker: hailq.Broker, start_worker: StartWorker, effects: str, pool: str) -> None:
    unlimited = broker.queue("unlimited", **LIMITED)
    limited = broker.queue("limited", **LIMITED)
    unlimited.send({"n": 1, "sleep_first": 30})
    limited.send({"n": 2, "sleep_first": 1.6})  # over its own 1 s, under the worker's 2.5 s
    start_worker("handlers:limits_app", "-q", "unlimited", "-q", "limited", "--pool", pool,
                 "--concurrency", "2", "--time-limit", "2.5")
    wait_for(lambda: len(done(effects)) == 2, timeout=60, what="both retries")
    errors = {n: [e.error for e in q.dead_letters()] for n, q in ((1, unlimited),
                                                                  (2, limited))}
    assert errors == {1: [], 2: []}
    assert rows(effects, "SELECT n, attempt FROM effects ORDER BY n") == [(1, 2), (2, 2)]
    assert unlimited.stats().nacked == 1 and limited.stats().nacked == 1


def test_rule_34_time_limits_are_checked_when_declared(sqlite_url: str) -> None:
    app = App()
    for bad in (0, -1, float("inf"), float("nan"), "30", True):
        with pytest.raises(hailq.InvalidArgument, match="time_limit"):
            app.handler("claims", time_limit=bad)
    app.add("claims", print, time_limit=2.5, lease=10)
    assert app.route("claims").time_limit == 2.5
    assert app.route("claims").settings == {"lease": 10}  # not a queue setting
    with hailq.connect(sqlite_url) as broker, \
            pytest.raises(hailq.InvalidArgument, match="time_limit"):
        Worker(broker, app, time_limit=0)


# -- in one process: what happens to the thread and its late work ------------------------


@pytest.mark.parametrize("backend_name", ["sqlite"])
def test_rule_34_a_thread_past_its_limit_is_interrupted_through_except_exception_and_its_late_ack_is_refused(  # noqa: E501
        broker: hailq.Broker) -> None:
    app = App()
    seen: list[str] = []
    release = threading.Event()

    @app.handler("spin", time_limit=0.3, **LIMITED)
    def spin(message: hailq.Message) -> None:
        try:
            while True:  # bytecodes: the exception raised into the thread lands here
                pass
        except Exception:  # does not swallow TimeLimitExceeded
            seen.append("swallowed")
        finally:
            seen.append(f"finally {message.attempt}")

    @app.handler("stuck", time_limit=0.3, **LIMITED)
    def stuck(message: hailq.Message) -> None:
        try:
            release.wait(10)  # a blocking call: nothing interrupts it
        except BaseException:  # arrives as the wait returns; a handler may ignore it
            seen.append(f"interrupted {message.attempt}")
        try:
            message.ack()  # the lease went back with the time limit's nack
        except hailq.LeaseLost:
            seen.append(f"ack refused {message.attempt}")

    spins, stucks = broker.queue("spin", **LIMITED), broker.queue("stuck", **LIMITED)
    spins.send(1)
    stucks.send(2)
    worker = Worker(broker, app, concurrency=2, poll=0.2, grace=1)
    thread = threading.Thread(target=worker.run, kwargs={"handle_signals": False},
                              daemon=True)
    thread.start()
    try:
        wait_for(lambda: spins.stats().dead == 1 and stucks.stats().dead == 1, timeout=30,
                 what="both to die of their time limit")
        # The last attempt's nack can come before its thread has run its finally.
        wait_for(lambda: len([s for s in seen if s.startswith("finally")]) >= 3, timeout=10,
                 what="the last attempt's finally")
        assert seen.count("swallowed") == 0
        assert [s for s in seen if s.startswith("finally")] == [
            "finally 1", "finally 2", "finally 3"]
        release.set()
        wait_for(lambda: seen.count("ack refused 3") == 1, timeout=10,
                 what="the abandoned threads' acks")
        assert sorted(s for s in seen if s.startswith(("ack", "interrupted"))) == [
            "ack refused 1", "ack refused 2", "ack refused 3",
            "interrupted 1", "interrupted 2", "interrupted 3"]
        assert stucks.stats().late_acks == 0
        assert worker.tally.done == 0 and worker.tally.dead == 2
        assert worker.tally.time_limited == 6
        (dead,) = stucks.dead_letters()
        assert [e.error.split(":")[0] for e in dead.errors] == ["time limit (0.3 s) exceeded"] * 3
    finally:
        worker.stop()
        worker.stop()
        thread.join(10)
    assert not thread.is_alive()


def test_the_slot_pool_replaces_an_abandoned_thread_and_keeps_its_size() -> None:
    from hailq.runtime.executor import SlotPool

    pool = SlotPool(2, name="test-slot")
    pool.start()
    gate = threading.Event()
    holder: list[threading.Thread] = []
    pool.submit(lambda: (holder.append(threading.current_thread()), gate.wait(5)))
    wait_for(lambda: holder, what="the job to start")
    assert pool.replace(holder[0]) == 1
    assert pool.threads == 2
    pair = threading.Barrier(3, timeout=5)
    pool.submit(pair.wait)
    pool.submit(pair.wait)
    pair.wait()  # both fresh slots ran at once beside the stuck one
    gate.set()
    wait_for(lambda: not holder[0].is_alive(), what="the abandoned thread to end")
    assert pool.threads == 2
    pool.close()


def test_the_watchdog_fires_only_for_handlers_still_running() -> None:
    fired: list[str] = []
    watchdog = Watchdog(lambda running: fired.append(running.message))
    watchdog.start()
    try:
        quick, slow, unlimited = Running("quick", 0.2), Running("slow", 0.2), Running("x", None)
        for running in (quick, slow, unlimited):
            watchdog.watch(running)
        watchdog.forget(quick)
        wait_for(lambda: fired, 10, what="the watchdog to fire")
        time.sleep(0.1)  # about time: the forgotten one would have fired by now too
        assert fired == ["slow"]
    finally:
        watchdog.close()
