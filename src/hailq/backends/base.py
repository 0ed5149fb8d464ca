"""The seam between queue semantics and storage.

Each method is named entity-then-verb and takes one params object, so an
operation added later (pause, rate limits, schedules, metrics) fits the same
shape. Nothing in a params object is a performance hint: a backend reads a
queue's live settings (lease, attempts, cap, aging, dead-letter policy) from
its own tables where the statement runs, so an operator's change reaches
running consumers without a restart. ``tests/backends`` calls this seam
directly on every backend; ``tests/conformance`` goes through the public API.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, Protocol

from hailq.backends.figure_rows import BucketAdd as BucketAdd
from hailq.backends.figure_rows import FigureRows as FigureRows
from hailq.backends.figure_rows import FiguresRecordParams as FiguresRecordParams
from hailq.backends.figure_rows import FiguresWindowParams as FiguresWindowParams
from hailq.backends.figure_rows import Point as Point
from hailq.backends.figure_rows import RangeAdd as RangeAdd
from hailq.backends.figure_rows import RangeRow as RangeRow
from hailq.backends.figure_rows import RateAdd as RateAdd
from hailq.backends.figure_rows import RateSlot as RateSlot
from hailq.backends.figure_rows import SketchAdd as SketchAdd
from hailq.backends.figure_rows import SketchRow as SketchRow
from hailq.backends.levels import LevelsBackend
from hailq.backends.overview import OverviewBackend
from hailq.backends.schedules import ScheduleBackend
from hailq.models import (
    AutoscalerInfo,
    DeadMessage,
    MessageDetails,
    PeekedMessage,
    QueueRecord,
    QueueStats,
    Subscription,
    WorkerInfo,
)


@dataclass(frozen=True, slots=True)
class NewMessage:
    """One message to insert, already validated and encoded."""

    queue: str
    id: str
    body: bytes
    body_kind: int
    headers: str | None
    priority: int
    ordering_key: str | None
    delay: float
    dedup_id: str | None
    dedup_window: float
    aging: float | None
    # Deadline order (rule 41): the target of this message's priority; None otherwise.
    target: float | None = None


class Receipt(NamedTuple):
    """One lease: the message, the lease's token and, where known, the row's position
    (lets a backend find the row without an index on ids)."""

    queue: str
    message_id: str
    token: str
    seq: int | None = None


class ClaimedRow(NamedTuple):
    """One claimed message as the database returned it (a tuple: built once per message)."""

    id: str
    token: str
    body: bytes
    body_kind: int
    headers: str | None
    priority: int
    ordering_key: str | None
    attempt: int
    enqueued_at: float
    lease_until: float
    seq: int
    sort_key: float  # rule 16's order, with seq: a claim's rows come sorted by these two
    # When it became receivable this time, on the broker's clock: a worker measures its
    # wait (handler start - available_at) per priority from it (rule 25).
    available_at: float = 0.0
    # This lease's place in the one sequence every lease of the database draws from
    # (rule 41): a downstream refuses a write that carries a lower one than it has seen.
    fencing_token: int = 0


@dataclass(frozen=True, slots=True)
class QueueSaveParams:
    name: str
    settings: str  # QueueSettings.to_json()
    # Its aging changed: in the same transaction the live messages get the sort keys
    # the new setting gives them (rule 16).
    resort: bool = False


@dataclass(frozen=True, slots=True)
class SendParams:
    messages: Sequence[NewMessage]
    connection: Any = None  # the caller's open transaction on the broker's database


class ClaimParams(NamedTuple):
    """A receive (a tuple: built on every receive), with the acks of finished work that
    go in the same transaction where the backend can."""

    queue: str
    max_messages: int
    lease: float | None = None  # None: the queue's stored lease
    acks: Sequence[Receipt] = ()


class ClaimResult(NamedTuple):
    acked: list[bool | None]  # per ack, as message_ack
    rows: list[ClaimedRow]


class AckParams(NamedTuple):
    receipts: Sequence[Receipt]


NackOutcome = Literal["retry", "dead", "give_back"]


@dataclass(frozen=True, slots=True)
class NackParams:
    receipt: Receipt
    error: str
    # retry: back now or after the delay, dead after the last attempt (rule 13);
    # dead: dead-letter now; give_back: returned untried, never killed while its lease
    # holds, and keeping its place in line.
    outcome: NackOutcome = "retry"
    delay: float | None = None  # None: backoff[attempt - 1], the queue's retry policy
    backoff: tuple[float, ...] = (0.0,)  # the last entry serves every later attempt


@dataclass(frozen=True, slots=True)
class ExtendParams:
    receipts: Sequence[Receipt]
    seconds: float


@dataclass(frozen=True, slots=True)
class PeekParams:
    queue: str
    limit: int = 10


@dataclass(frozen=True, slots=True)
class DeadListParams:
    queue: str
    error_contains: str | None = None
    older_than: float | None = None
    ordering_key: str | None = None
    limit: int = 1000
    newest_first: bool = False  # the latest deaths first (hailq doctor reads its window)


@dataclass(frozen=True, slots=True)
class RedriveParams:
    queue: str
    ids: Sequence[str] | None = None  # None: every dead message


@dataclass(frozen=True, slots=True)
class PurgeParams:
    queue: str
    dead: bool = False  # the dead letters instead of the live messages


@dataclass(frozen=True, slots=True)
class WaitParams:
    queues: Sequence[str]
    timeout: float


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
class QueueDeleteParams:
    name: str
    force: bool = False  # delete its messages too; without it a queue holding any is kept


@dataclass(frozen=True, slots=True)
class TopicDeleteParams:
    name: str
    force: bool = False  # remove its subscriptions too (their queues stay)


@dataclass(frozen=True, slots=True)
class SubscriptionDeleteParams:
    topic: str
    queue: str


@dataclass(frozen=True, slots=True)
class MessageGetParams:
    queue: str
    id: str


@dataclass(frozen=True, slots=True)
class MessageDeleteParams:
    queue: str
    id: str
BuildCopies = Callable[[list[Subscription]], list[NewMessage]]


@dataclass(frozen=True, slots=True)
class PublishParams:
    topic: str
    build: BuildCopies  # called with the subscriptions read inside the transaction
    connection: Any = None


class Backend(ScheduleBackend, OverviewBackend, LevelsBackend, Protocol):
    """Storage for hailq. Times are seconds since the epoch on the backend's clock.
    Periodic schedules' methods: ``hailq/backends/schedules.py``; the overview's:
    ``hailq/backends/overview.py``."""

    url_for_display: str

    def schema_migrate(self) -> int:
        """Create or upgrade hailq's tables; return the schema version."""
        ...

    def schema_version(self) -> int:
        """The version of hailq's schema found, 0 where there is none; writes nothing."""
        ...

    def schema_latest(self) -> int:
        """The schema version this hailq creates and migrates to."""
        ...

    def clock_now(self) -> float:
        """The clock every lease deadline uses (the database's, where it has one)."""
        ...

    def queue_save(self, params: QueueSaveParams) -> None: ...

    def queue_get(self, name: str) -> str | None:
        """A queue's stored settings (JSON), None if it was never declared."""
        ...

    def queue_list(self) -> list[tuple[str, str]]: ...

    def queue_describe(self, params: QueueDescribeParams) -> list[QueueRecord]:
        """Declared settings, operator overrides and pause of the named (or every) queue,
        by name; a queue that does not exist is left out."""
        ...

    def queue_configure(self, params: QueueConfigureParams) -> QueueRecord:
        """Store an operator's overrides apart from what code declares and make the
        effective settings what statements obey; QueueNotFound if there is no queue."""
        ...

    def queue_pause(self, params: QueuePauseParams) -> None:
        """Pause or resume a queue (operator state: ``queue_save`` never touches it);
        QueueNotFound if there is no queue."""
        ...

    def queue_delete(self, params: QueueDeleteParams) -> int:
        """Delete a queue with everything it owns, its subscriptions included; return how
        many messages went with it. QueueNotEmpty (nothing deleted) if it holds messages
        and not ``force``; QueueNotFound if there is no queue."""
        ...

    def queue_maintain(self, queue: str) -> None:
        """Upkeep without a claim: due messages become ready, ended leases return their
        message or kill it after its last attempt (rule 13)."""
        ...

    def queue_stats(self, queue: str) -> QueueStats:
        """Counts as the next receive would find them; a read, it writes nothing."""
        ...

    def message_send(self, params: SendParams) -> list[str]:
        """Insert atomically; a dedup hit returns the earlier id and inserts nothing.
        With a connection the insert joins that transaction and commits with it."""
        ...

    def message_claim(self, params: ClaimParams) -> ClaimResult:
        """Ack ``params.acks``, then lease up to ``max_messages`` in rule-16 order (ended
        leases and due messages settled first), in one transaction where it can."""
        ...

    def message_ack(self, params: AckParams) -> list[bool | None]:
        """Delete each message whose lease its receipt names, in one transaction.
        Per receipt: ``False`` acked in time, ``True`` a late ack, ``None`` lease lost."""
        ...

    def message_ack_transaction(self, receipt: Receipt) -> AbstractContextManager[Any]:
        """Yield a connection in a transaction that commits the caller's effect with the
        ack; LeaseLost (everything rolled back) if the lease was lost."""
        ...

    def message_nack(self, params: NackParams) -> bool:
        """Give the message back, or dead-letter it; False if the lease was lost."""
        ...

    def message_extend(self, params: ExtendParams) -> list[float | None]:
        """Move each lease's end; per receipt the new deadline, None if it was lost."""
        ...

    def message_peek(self, params: PeekParams) -> list[PeekedMessage]: ...

    def message_wait(self, params: WaitParams) -> None:
        """Block until a message may have become receivable in one of the queues, or
        the timeout. May return early; callers claim again and wait again."""
        ...

    def message_purge(self, params: PurgeParams) -> int: ...

    def message_get(self, params: MessageGetParams) -> MessageDetails | None:
        """One message by id as the next receive would find it; a read."""
        ...

    def message_delete(self, params: MessageDeleteParams) -> bool:
        """Delete one message whatever its state (counted as purged, its key's next
        message freed); False if the queue holds no such message."""
        ...

    def dead_list(self, params: DeadListParams) -> list[DeadMessage]: ...

    def dead_redrive(self, params: RedriveParams) -> int: ...

    def topic_save(self, topic: str) -> None: ...

    def topic_list(self) -> list[str]: ...

    def topic_delete(self, params: TopicDeleteParams) -> int:
        """Delete a topic; return how many subscriptions were removed with it (their
        queues stay). TopicHasSubscriptions if it has any and not ``force``;
        TopicNotFound if there is no topic."""
        ...

    def topic_publish(self, params: PublishParams) -> list[str]:
        """Read the subscriptions and insert the copies ``build`` makes, atomically."""
        ...

    def subscription_save(self, subscription: Subscription) -> None: ...

    def subscription_list(self, topic: str) -> list[Subscription]: ...

    def subscription_delete(self, params: SubscriptionDeleteParams) -> bool:
        """Stop copying the topic's messages into the queue (the queue stays); False if
        it was no subscription of the topic."""
        ...

    def worker_save(self, worker: WorkerInfo) -> None:
        """Record a worker's heartbeat; ``last_seen`` is set to the backend's clock."""
        ...

    def worker_list(self) -> list[WorkerInfo]: ...

    def worker_prune(self, before: float) -> int:
        """Forget workers not seen since ``before``; return how many."""
        ...

    def figures_record(self, params: FiguresRecordParams) -> None:
        """Add a process's batched figures (histogram buckets, slot rates, samples)."""
        ...

    def figures_read(self, queue: str) -> FigureRows:
        """A queue's stats and stored figures in one snapshot; a read, it writes nothing."""
        ...

    def figures_window(self, params: FiguresWindowParams) -> list[RateSlot]:
        """A queue's rate slots since ``params.since``, oldest first, by priority within a
        slot; QueueNotFound if there is no queue. A read."""
        ...

    def autoscale_record(self, info: AutoscalerInfo) -> None:
        """Store one decision of an autoscaler (``at`` is the backend's clock) and forget
        decisions older than an hour."""
        ...

    def autoscale_list(self, queue: str | None, since: float,
                       limit: int | None = None) -> list[AutoscalerInfo]:
        """Decisions at ``since`` or later of ``queue``'s autoscalers (None: every queue):
        the last ``limit`` newest first, or without ``limit`` each one's last."""
        ...

    def close(self) -> None: ...
