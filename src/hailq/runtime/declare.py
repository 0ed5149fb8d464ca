"""What an app needs in the database before anything flows (SPEC rules 19, 35): its
queues with their settings, its subscribers' topics and subscriptions, its schedules.

A publish reaches only subscriptions that exist (rule 19), so a deployment declares
an app's subscriptions before its producers start: ``hailq declare TARGET`` runs this
without starting workers, and every worker runs it again as it starts. Declaring is
idempotent; a declaration with other settings updates them, as ``broker.queue`` does.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from hailq.internal import ops
from hailq.runtime.app import App

if TYPE_CHECKING:
    from hailq.broker import Broker
    from hailq.queue import Queue


@dataclass(frozen=True)
class Declared:
    """What ``declare`` stored: queue names, ``(topic, subscription)`` pairs, schedules."""

    queues: list[str] = field(default_factory=list)
    subscriptions: list[tuple[str, str]] = field(default_factory=list)
    schedules: list[str] = field(default_factory=list)


def declare_queues(broker: Broker, app: App,
                   queues: Iterable[str] | None = None) -> dict[str, Queue]:
    """Declare the app's queues (``queues`` only, if given) with their routes' settings,
    a subscriber's as its topic's subscription; return them by name."""
    wanted = None if queues is None else set(queues)
    declared: dict[str, Queue] = {}
    for route in app:
        if wanted is not None and route.queue not in wanted:
            continue
        if route.topic is None:
            declared[route.queue] = broker.queue(route.queue, **route.settings)
        else:
            filter_ = dict(route.filter) if route.filter is not None else None
            declared[route.queue] = broker.topic(route.topic).subscribe(
                route.queue, filter_, **route.settings)
    return declared


def declare(broker: Broker, app: App) -> Declared:
    """Declare everything the app needs: queues, subscriptions and schedules."""
    queues = declare_queues(broker, app)
    ops(broker).declare_schedules(app.periodics, broker.now())
    return Declared(
        queues=list(queues),
        subscriptions=[(r.topic, r.queue) for r in app if r.topic is not None],
        schedules=[p.name for p in app.periodics])
