"""The worker from Python: ``hailq.runtime.Worker`` in a thread, stopped with ``stop()``."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

import hailq
from hailq.runtime import App, Worker

from .support import wait_for


@pytest.fixture
def running() -> Iterator[list[tuple[Worker, threading.Thread]]]:
    """Workers started by a test; each is stopped at teardown if the test did not."""
    workers: list[tuple[Worker, threading.Thread]] = []
    yield workers
    for worker, thread in workers:
        worker.stop()
        worker.stop()
        thread.join(10)


def start(running: list[tuple[Worker, threading.Thread]], worker: Worker) -> threading.Thread:
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    running.append((worker, thread))
    return thread


def test_worker_runs_an_app_until_stopped_and_declares_its_queues(
        broker: hailq.Broker, running: list[tuple[Worker, threading.Thread]]) -> None:
    app = App()
    seen: list[object] = []

    @app.handler("claims", lease=300, max_attempts=7)
    def check(message: hailq.Message) -> None:
        seen.append(message.body)

    broker.queue("claims").send_many(list(range(10)))
    worker = Worker(broker, app, concurrency=3, poll=0.2)
    thread = start(running, worker)
    wait_for(lambda: len(seen) == 10, what="ten messages")
    worker.stop()
    thread.join(10)
    assert not thread.is_alive()

    claims = broker.get_queue("claims")
    assert (claims.settings.lease, claims.settings.max_attempts) == (300, 7)
    wait_for(lambda: claims.stats().acked == 10, what="ten acks")
    assert sorted(seen) == list(range(10))  # type: ignore[type-var]
    [me] = [w for w in broker.workers() if w.id == worker.worker_id]
    assert (me.state, me.concurrency, me.queues) == ("stopped", 3, ["claims"])


def test_stop_gives_back_a_stuck_handlers_message_after_the_grace_period(
        broker: hailq.Broker, running: list[tuple[Worker, threading.Thread]]) -> None:
    release = threading.Event()
    entered = threading.Event()

    def stuck(message: hailq.Message) -> None:
        entered.set()
        release.wait(30)

    slow = broker.queue("slow", lease=60)
    slow.send("claim 8311")
    worker = Worker(broker, stuck, queues=["slow"], grace=0.3, poll=0.2)
    thread = start(running, worker)
    assert entered.wait(10)
    worker.stop()
    thread.join(10)
    assert not thread.is_alive()

    [again] = slow.receive(wait=2)
    assert again.attempt == 2
    release.set()  # the old handler ends now; its outcome no longer counts
    threading.Event().wait(0.3)
    again.ack()  # still our lease: the stale handler did not ack or nack it
    assert slow.stats().acked == 1


def test_a_mapping_of_handlers_in_weighted_order(
        broker: hailq.Broker, running: list[tuple[Worker, threading.Thread]]) -> None:
    seen: list[str] = []
    lock = threading.Lock()

    def record(message: hailq.Message) -> None:
        with lock:
            seen.append(message.queue)

    for name in ("high", "low"):
        broker.queue(name).send_many([name] * 40)
    worker = Worker(broker, {"high": record, "low": record}, weights={"high": 3, "low": 1},
                    poll=0.2)
    start(running, worker)
    wait_for(lambda: len(seen) == 80, what="eighty messages")
    assert seen[:40].count("low") == 10


def test_bad_worker_arguments_fail_before_anything_runs(broker: hailq.Broker) -> None:
    def handle(message: hailq.Message) -> None: ...

    with pytest.raises(hailq.InvalidArgument, match="--queue"):
        Worker(broker, handle)
    with pytest.raises(hailq.InvalidArgument, match="not both"):
        Worker(broker, {"a": handle}, queues=["a"], weights={"a": 1})
    with pytest.raises(hailq.InvalidArgument, match="concurrency"):
        Worker(broker, {"a": handle}, concurrency=0)
    with pytest.raises(hailq.InvalidArgument, match="no handler for queue 'b'"):
        Worker(broker, {"a": handle}, weights={"a": 1, "b": 2})
    with pytest.raises(hailq.InvalidArgument, match="grace"):
        Worker(broker, {"a": handle}, grace=-1)


def test_every_duration_a_worker_takes_may_be_a_timedelta(broker: hailq.Broker) -> None:
    from datetime import timedelta

    worker = Worker(broker, {"a": lambda m: None}, grace=timedelta(seconds=5),
                    poll=timedelta(milliseconds=200), registry_interval=timedelta(seconds=2),
                    time_limit=timedelta(minutes=1))
    assert (worker.grace, worker.poll, worker.registry_interval, worker.time_limit) == (
        5.0, 0.2, 2.0, 60.0)
    with pytest.raises(hailq.InvalidArgument, match="time_limit"):
        Worker(broker, {"a": lambda m: None}, time_limit=timedelta(0))
