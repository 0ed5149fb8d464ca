"""``Broker`` is the user's API (issue 37): each public method is one a user's code
calls, documented; what only the runtime, ``hailq serve`` and the command line need
is on ``hailq.internal.RuntimeOps``. ``hailq.aio``'s broker mirrors the sync names."""

from __future__ import annotations

import inspect

import hailq
import hailq.aio
from hailq.internal import RuntimeOps

# Every public method of Broker, each a call a user's code makes (a test that fails
# here asks: is the new method the user's, or the runtime's? See docs/contributing.md).
USER_FACING = {
    "add_hook", "autoscale_decisions", "autoscalers", "cancel", "close", "configure",
    "delete_queue", "delete_schedule", "delete_topic", "get_queue", "get_schedule",
    "get_topic", "history", "levels", "maintain", "migrate", "now", "overview",
    "pause_schedule", "queue", "queues", "remove_schedule", "resume_schedule",
    "schedule", "schedules", "schema_status", "topic", "topics", "wait", "workers",
}
# The async broker's own (no sync twin): its loop, and the runtime's bridge between a
# sync worker and async handlers.
ASYNC_ONLY = {"adopt", "adopt_message", "driver", "loop", "shares", "sync", "url"}


def _public(cls: type) -> set[str]:
    return {name for name in dir(cls) if not name.startswith("_")}


def test_broker_public_methods_are_the_users_each_documented() -> None:
    assert _public(hailq.Broker) == USER_FACING
    for name in USER_FACING:
        doc = inspect.getdoc(getattr(hailq.Broker, name))
        assert doc and len(doc) > 20, f"Broker.{name} has no docstring"


def test_runtime_needs_are_behind_the_internal_facade_not_on_broker() -> None:
    runtime = _public(RuntimeOps) - {"broker"}
    assert runtime >= {"save_worker", "record_autoscale", "send_slots",
                       "keep_schedules_declared", "declare_schedules", "refresh",
                       "record_levels", "take_maintenance_turn", "prune"}
    assert not runtime & _public(hailq.Broker)
    assert not runtime & _public(hailq.aio.AsyncBroker)
    for name in runtime:
        assert inspect.getdoc(getattr(RuntimeOps, name)), f"RuntimeOps.{name}"


def test_async_broker_mirrors_the_sync_names() -> None:
    asynchronous = _public(hailq.aio.AsyncBroker)
    assert asynchronous - ASYNC_ONLY == USER_FACING
