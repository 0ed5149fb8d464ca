"""Rule 40 in real worker processes: a cancelled message's handler is stopped within a
second, a later ack is refused, the message keeps its max_in_flight slot and its
ordering key until the handler has stopped; on both backends and both pools."""

from __future__ import annotations

import signal
import time

import pytest

import hailq

from .conftest import StartWorker
from .support import done, rows, started, wait_for

SOON = 1.0  # "within a second"
POOLS = ["thread", "process"]


def _started_at(effects: str, n: int) -> float | None:
    found = rows(effects, "SELECT at FROM events WHERE n = ? ORDER BY seq", n)
    return found[0][0] if found else None


def _stopped(effects: str) -> list[tuple[str, float, int]]:
    try:
        return rows(effects, "SELECT message_id, at, refused FROM stopped")
    except Exception:  # the table appears with the first stop
        return []


def _cancel_while_running(broker: hailq.Broker, queue: hailq.Queue, effects: str,
                          running: str) -> float:
    """Cancel ``running`` once its handler has started; the seconds until it is gone."""
    wait_for(lambda: started(effects), timeout=60, what="the handler to start")
    begun = time.monotonic()
    assert broker.cancel(running) == "running"
    wait_for(lambda: queue.get_message(running) is None, timeout=30,
             what="the cancelled message to be let go")
    return time.monotonic() - begun


@pytest.mark.parametrize("pool", POOLS)
def test_rule_40_a_cancelled_handler_stops_within_a_second_and_holds_its_slot_till_then(
        broker: hailq.Broker, start_worker: StartWorker, effects: str, pool: str) -> None:
    queue = broker.queue("cancellable", lease=30, max_in_flight=1)
    running = queue.send({"n": 1, "spin": 60})
    queue.send({"n": 2})
    worker = start_worker("cancel_handlers:cancel_app", "-q", "cancellable", "--pool", pool,
                          "--concurrency", "2")
    took = _cancel_while_running(broker, queue, effects, running)
    assert took < SOON
    wait_for(lambda: done(effects) == [2], timeout=30, what="the next message")
    # The cap of one held while the cancelled handler ran: the next began after.
    assert [n for n, *_ in started(effects)] == [1, 2]
    if pool == "thread":
        [(stopped_id, stopped_at, refused)] = _stopped(effects)
        assert stopped_id == running and refused == 1  # its own ack was refused
        assert (_started_at(effects, 2) or 0) >= stopped_at
    # The next one's effect lands before its ack commits (a few ms later).
    wait_for(lambda: (lambda s: (s.in_flight, s.ready, s.dead, s.acked) == (0, 0, 0, 1))(
        queue.stats()), timeout=5, what="the next one's ack; nothing else left")
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(30) == 0


def test_rule_40_an_async_handler_is_cancelled_within_a_second(
        broker: hailq.Broker, start_worker: StartWorker, effects: str) -> None:
    queue = broker.queue("cancellable-async", lease=30, max_in_flight=1)
    running = queue.send({"n": 1, "spin": 60})
    queue.send({"n": 2})
    start_worker("cancel_handlers:cancel_app", "-q", "cancellable-async", "--concurrency", "2")
    assert _cancel_while_running(broker, queue, effects, running) < SOON
    wait_for(lambda: done(effects) == [2], timeout=30, what="the next message")
    assert [m for m, *_ in _stopped(effects)] == [running]


def test_rule_40_a_cancelled_keyed_head_frees_its_key_once_its_handler_stopped(
        broker: hailq.Broker, start_worker: StartWorker, effects: str) -> None:
    queue = broker.queue("cancellable-keyed", lease=30, on_dead="park")
    head = queue.send({"n": 1, "spin": 60}, ordering_key="policy-7")
    queue.send({"n": 2}, ordering_key="policy-7")
    start_worker("cancel_handlers:cancel_app", "-q", "cancellable-keyed", "--concurrency", "2")
    assert _cancel_while_running(broker, queue, effects, head) < SOON
    wait_for(lambda: done(effects) == [2], timeout=30, what="the key's next message")
    [(_, stopped_at, _)] = _stopped(effects)
    assert (_started_at(effects, 2) or 0) >= stopped_at
    stats = queue.stats()
    assert (stats.parked_keys, stats.dead, stats.dead_lettered) == ([], 0, 0)
