"""The pure parts of the runtime: handler registration, queue order, outcomes."""

from __future__ import annotations

import itertools

import pytest

import hailq
from hailq.runtime import App, StrictOrder, WeightedOrder, load_target, outcome_of, parse_weights
from hailq.runtime.outcome import short_traceback


def test_app_registers_handlers_in_declaration_order() -> None:
    app = App()

    @app.handler("claims", lease=300, max_attempts=5)
    def check(message: hailq.Message) -> None: ...

    @app.handler("results")
    async def store(message: hailq.Message) -> None: ...

    assert app.queues == ["claims", "results"]
    assert app.route("claims").handler is check
    assert app.route("claims").settings == {"lease": 300, "max_attempts": 5}


def test_unknown_handler_option_fails_when_declared() -> None:
    app = App()
    with pytest.raises(hailq.InvalidArgument, match="leese"):
        app.handler("claims", leese=300)
    with pytest.raises(hailq.InvalidArgument, match="max_attempts"):
        app.handler("claims", max_attempts=0)
    with pytest.raises(hailq.InvalidArgument, match="queue name"):
        app.handler("no spaces allowed")
    assert app.queues == []


def test_one_handler_per_queue() -> None:
    app = App()
    app.add("claims", print)
    with pytest.raises(hailq.InvalidArgument, match="already has a handler"):
        app.add("claims", print)


def test_route_of_unknown_queue_names_what_the_app_handles() -> None:
    app = App()
    app.add("claims", print)
    with pytest.raises(hailq.InvalidArgument, match="it handles: claims"):
        app.route("other")


def test_load_target_finds_apps_and_functions() -> None:
    import handlers

    assert load_target("handlers:app") is handlers.app
    assert load_target("handlers:work") is handlers.work
    for bad in ("handlers", "handlers:", "no_such_module_xyz:app", "handlers:missing",
                "handlers:SCHEMA"):
        with pytest.raises(hailq.InvalidArgument):
            load_target(bad)


def test_strict_order_asks_later_queues_only_for_what_earlier_lack() -> None:
    order = StrictOrder(["first", "second"])
    assert order.plan(4) == [("first", 4), ("second", 0)]


def test_weighted_order_interleaves_by_weight() -> None:
    order = WeightedOrder({"high": 3, "low": 1})
    picks = [order.pick() for _ in range(400)]
    for window in itertools.pairwise(range(0, 400, 4)):
        chunk = picks[window[0]:window[1]]
        assert chunk.count("low") == 1 and chunk.count("high") == 3
    # the low queue never waits more than total/weight picks
    gaps = [b - a for a, b in itertools.pairwise(i for i, q in enumerate(picks) if q == "low")]
    assert max(gaps) <= 4


def test_weighted_plan_shares_free_slots() -> None:
    order = WeightedOrder({"high": 3, "low": 1})
    plan = order.plan(8)
    assert dict(plan) == {"high": 6, "low": 2}
    assert WeightedOrder({"a": 1, "b": 1, "c": 5}).plan(1)[0] == ("c", 1)


def test_weights_parse_and_reject_nonsense() -> None:
    assert parse_weights("high=3, low=1") == {"high": 3, "low": 1}
    for bad in ("high", "high=x", "high=1,high=2", "=3", "high=0"):
        with pytest.raises(hailq.InvalidArgument):
            WeightedOrder(parse_weights(bad))
    with pytest.raises(hailq.InvalidArgument):
        StrictOrder(["a", "a"])
    with pytest.raises(hailq.InvalidArgument):
        StrictOrder([])


def test_outcomes_follow_rule_23() -> None:
    assert outcome_of(None).action == "ack"
    retry = outcome_of(hailq.Retry(delay=7, reason="busy"))
    assert (retry.action, retry.delay, retry.error) == ("nack", 7, "busy")
    assert outcome_of(hailq.Retry()).delay is None
    dead = outcome_of(hailq.DeadLetter("malformed"))
    assert (dead.action, dead.error) == ("dead", "malformed")
    try:
        raise KeyError("claim 8311")
    except KeyError as exc:
        failed = outcome_of(exc)
    assert failed.action == "nack" and failed.delay is None
    assert failed.error is not None and "Traceback" in failed.error
    assert "KeyError: 'claim 8311'" in failed.error


def test_short_traceback_keeps_the_innermost_frames_and_the_error() -> None:
    def deep(n: int) -> None:
        if n == 0:
            raise ValueError("x" * 5000)
        deep(n - 1)

    try:
        deep(20)
    except ValueError as exc:
        text = short_traceback(exc, frames=3, limit=500)
        full = short_traceback(exc, frames=3, limit=100_000)
    assert len(text) <= 500 and text.endswith("xxx")
    assert full.count("in deep") == 3


@pytest.mark.parametrize("target, advice", [
    ("app.py:app", "write app:app (without .py)"),
    ("../dir/app:app", "PYTHONPATH=../dir hailq worker app:app"),
    ("jobs/checkers.py:app", "jobs.checkers:app if jobs is a package"),
])
def test_a_target_written_as_a_file_path_says_what_to_write_instead(
        target: str, advice: str) -> None:
    with pytest.raises(hailq.InvalidArgument) as caught:
        load_target(target)
    assert advice in str(caught.value)
