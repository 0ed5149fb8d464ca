"""Plain data returned by the public API.

The message state machine, written once (every backend stores these states):

- ``scheduled``: waiting for ``available_at`` (a delay, or a retry backoff).
- ``ready``: receivable now, in the order of SPEC rule 16.
- ``leased``: received; one consumer holds the lease until ``lease_until``.
  When the lease ends without ack the next claim makes it ``ready`` again, or
  ``dead`` if it used its last attempt.
- ``blocked``: has an ordering key whose earlier message is not yet acked or
  dead (rule 17); the next in key order is released when its head finishes.
- ``dead``: used up its attempts or was dead-lettered; kept until redriven or
  purged. A dead keyed message of an ``on_dead="park"`` queue holds its key.

An acknowledged message is deleted: there is no ``done`` state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

# "cancelled": a running message an operator cancelled, until its handler has stopped or
# its lease has ended (rule 40); only a lookup by id shows it.
State = Literal["scheduled", "ready", "leased", "blocked", "dead", "cancelled"]
STATES: tuple[State, ...] = ("scheduled", "ready", "leased", "blocked", "dead")


@dataclass(frozen=True)
class AttemptError:
    """What went wrong on one attempt: a handler error, a nack reason or an ended lease."""

    attempt: int
    error: str
    at: float


class _Failures:
    """The failed attempts of a message, latest last."""

    errors: list[AttemptError]

    @property
    def last_error(self) -> str | None:
        """The error of the latest failed attempt, or None."""
        return self.errors[-1].error if self.errors else None


@dataclass(frozen=True)
class _Message:
    """What every stored message carries, however it is looked at."""

    id: str
    queue: str
    body: Any
    headers: dict[str, str]
    priority: int
    ordering_key: str | None
    attempt: int
    enqueued_at: float


@dataclass(frozen=True)
class DeadMessage(_Message, _Failures):
    """A dead message with the error of every failed attempt."""

    dead_at: float
    errors: list[AttemptError] = field(default_factory=list)
    parked: bool = False


@dataclass(frozen=True)
class _Stored(_Message):
    """A message as stored, in the state the next receive would find it."""

    state: State
    available_at: float


@dataclass(frozen=True)
class PeekedMessage(_Stored):
    """A message looked at without leasing it."""


@dataclass(frozen=True)
class MessageDetails(_Stored, _Failures):
    """One message looked up by id (``Queue.get_message``), in the state the next receive
    would find it: an ended lease shows as ready again, or dead after the last attempt."""

    lease_until: float | None  # while leased: when the lease ends
    dead_at: float | None
    errors: list[AttemptError] = field(default_factory=list)
    parked: bool = False  # dead and holding its ordering key (on_dead="park")


@dataclass(frozen=True)
class QueueRecord:
    """A queue as stored: what code declared, what an operator laid over it, the pause."""

    name: str
    declared: str  # QueueSettings JSON
    overrides: str | None  # a JSON object of settings, or None
    paused: bool


@dataclass(frozen=True)
class QueueStats:
    """Counts of one queue, and the totals since it was declared."""

    queue: str
    ready: int
    scheduled: int
    in_flight: int
    blocked: int
    dead: int
    oldest_ready_age: float | None
    sent: int
    acked: int
    nacked: int
    redelivered: int
    dead_lettered: int
    late_acks: int
    parked_keys: list[str] = field(default_factory=list)
    # An operator paused it (rule 32): receivers and workers get nothing from it.
    paused: bool = False

    @property
    def delayed(self) -> int:
        """Messages not yet due (delay or retry backoff)."""
        return self.scheduled

    @property
    def backlog(self) -> int:
        """Work that is waiting: ready, due later, or behind its ordering key."""
        return self.ready + self.scheduled + self.blocked


@dataclass(frozen=True)
class Subscription:
    """A topic's subscription: an ordinary queue plus an optional header filter."""

    topic: str
    queue: str
    filter: dict[str, str | list[str]] | None

    def matches(self, headers: dict[str, str]) -> bool:
        """True when every filtered header is present with an accepted value."""
        if not self.filter:
            return True
        for name, wanted in self.filter.items():
            value = headers.get(name)
            if isinstance(wanted, list):
                if value not in wanted:
                    return False
            elif value != wanted:
                return False
        return True


@dataclass(frozen=True)
class RunningMessage:
    """A message whose handler ran in a worker's slot when the worker last reported:
    since ``since`` (the broker's clock), on its ``attempt``."""

    message_id: str
    queue: str
    attempt: int
    since: float


@dataclass(frozen=True)
class WorkerInfo:
    """A worker process as it last reported itself (the worker registry)."""

    id: str
    host: str
    pid: int
    queues: list[str]
    concurrency: int
    in_flight: int
    started_at: float
    last_seen: float
    state: str  # "running", "draining" or "stopped"
    running: list[RunningMessage] = field(default_factory=list)  # its slots, oldest first


@dataclass(frozen=True)
class ScheduleInfo:
    """A periodic schedule as stored in the broker's database (SPEC rule 35)."""

    name: str
    queue: str
    cron: str | None  # a cron expression, or None with ``every``
    every: float | None  # seconds between slots, or None with ``cron``
    timezone: str
    catch_up: int
    body: Any
    headers: dict[str, str]
    priority: int
    source: str  # "app" (declared with app.periodic) or "broker" (broker.schedule)
    paused: bool
    created_at: float
    declared_at: float  # the last time a running scheduler declared it
    last_slot: float  # the last slot sent (its creation time before the first)
    fired_at: float | None  # when a scheduler last sent it
    fired: int  # messages sent so far
    declared: bool  # "broker" schedules always; "app" ones while a running worker declares
    next_slot: float | None  # the next slot it fires (None while paused or undeclared)


@dataclass(frozen=True)
class AutoscalerInfo:
    """One decision of a ``hailq autoscale`` process (SPEC rule 24), as stored in the
    broker's database: ``Broker.autoscalers()`` gives each autoscaler's last one."""

    id: str  # host:pid:queue
    queue: str
    host: str
    pid: int
    workers: int  # worker processes it runs from this decision on
    desired: int  # what the backlog asks, within --min, --max, rate limit and ceiling
    decision: str  # "grow", "shrink", "hold", or "stop" (its last row, workers 0)
    reason: str
    at: float  # on the broker's clock
    ceiling: int | None = None  # the saturation point it measured, while that holds
    minimum: int = 0
    maximum: int = 0
    throughput: float | None = None  # completions per second in its last window
    handler_time: float | None = None  # mean handler seconds in its last window
