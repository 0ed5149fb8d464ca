"""The params objects of the seam's operator, catalog and lookup calls (one object per
call, rule 39), apart from ``base.py`` to keep it readable; ``base`` re-exports them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True, slots=True)
class QueueRef:
    """One queue by name: the params of a call about a whole queue."""

    queue: str


@dataclass(frozen=True, slots=True)
class MessageIdRef:
    """One message by id alone, its queue unknown."""

    id: str


@dataclass(frozen=True, slots=True)
class TopicRef:
    """One topic by name."""

    topic: str


@dataclass(frozen=True, slots=True)
class MessageRef(QueueRef):
    """One message, by its queue and id."""

    id: str


@dataclass(frozen=True, slots=True)
class QueueDescribeParams:
    names: Sequence[str] | None = None  # None: every queue


@dataclass(frozen=True, slots=True)
class QueueConfigureParams:
    """An operator's overrides: ``changes`` (JSON values, checked) are laid over the
    stored overrides, after clearing them all with ``reset``."""

    name: str
    changes: str  # a JSON object
    reset: bool = False


@dataclass(frozen=True, slots=True)
class QueuePauseParams:
    name: str
    paused: bool


@dataclass(frozen=True, slots=True)
class DeleteParams:
    """A queue or a topic to delete. Without ``force`` a queue holding messages (live
    or dead) or a topic with subscriptions is kept; with it, its messages go with the
    queue, and a topic's subscriptions go (their queues stay)."""

    name: str
    force: bool = False


@dataclass(frozen=True, slots=True)
class SubscriptionDeleteParams:
    topic: str
    queue: str


# What a cancel found (rule 40): a waiting message was removed and never starts; a
# running one is marked and its handler asked to stop.
CancelOutcome = Literal["waiting", "running"]


@dataclass(frozen=True, slots=True)
class WorkerPruneParams:
    before: float  # forget workers not seen since


@dataclass(frozen=True, slots=True)
class AutoscaleListParams:
    queue: str | None  # None: every queue
    since: float
    limit: int | None = None  # None: each autoscaler's last decision
