"""Strict and weighted order over two queues, 1,000 messages (SPEC rule 18)."""

from __future__ import annotations

import hailq

from .conftest import StartWorker
from .support import started, wait_for


def _fill(broker: hailq.Broker) -> None:
    for name in ("high", "low"):
        broker.queue(name).send_many([{"n": n} for n in range(500)])


def _order(effects: str) -> list[str]:
    wait_for(lambda: len(started(effects)) >= 1000, timeout=120, what="1,000 messages")
    return [queue for _, _, queue, *_ in started(effects)]


def test_strict_order_drains_the_first_queue_before_the_next(
        broker: hailq.Broker, start_worker: StartWorker, effects: str) -> None:
    _fill(broker)
    start_worker("handlers:order_app", "--queue", "high", "--queue", "low")
    assert _order(effects) == ["high"] * 500 + ["low"] * 500


def test_strict_order_holds_with_several_slots(
        broker: hailq.Broker, start_worker: StartWorker, effects: str) -> None:
    _fill(broker)
    start_worker("handlers:order_app", "-q", "low", "-q", "high", "--concurrency", "4")
    order = _order(effects)
    # "high" is asked only once every "low" message is leased, so a low that starts after
    # the first high must have sat in one of the three other slots at that moment.
    first_high = order.index("high")
    assert order[first_high:].count("low") <= 3
    assert order.count("low") == order.count("high") == 500


def test_weighted_order_never_lets_a_non_empty_queue_wait_beyond_its_weight(
        broker: hailq.Broker, start_worker: StartWorker, effects: str) -> None:
    _fill(broker)
    start_worker("handlers:order_app", "--weights", "high=3,low=1")
    order = _order(effects)
    both_busy = order.index("low") + 4 * 166  # high lasts about 500/3*4 messages
    for k in range(1, min(both_busy, 660)):
        assert abs(order[:k].count("low") - k / 4) <= 1, k
    gaps = [j - i for i, j in zip(
        [i for i, q in enumerate(order[:660]) if q == "low"],
        [i for i, q in enumerate(order[:660]) if q == "low"][1:], strict=False)]
    assert max(gaps) <= 4
    assert order.count("high") == order.count("low") == 500


def test_weighted_order_shares_many_slots_by_weight(
        broker: hailq.Broker, start_worker: StartWorker, effects: str) -> None:
    _fill(broker)
    start_worker("handlers:order_app", "--weights", "high=3,low=1", "--concurrency", "8")
    order = _order(effects)
    share = order[:600].count("low") / 600
    assert 0.2 <= share <= 0.3
