"""The seam between queue semantics and storage.

Each method is named entity-then-verb and takes one params object, so an
operation added later (pause, rate limits, schedules, metrics) fits the same
shape. No params object carries a queue's settings: a backend reads them
(lease, attempts, cap, aging, targets, dedup window, largest body, retry and
dead-letter policy) from its own tables where the statement runs, so an
operator's change reaches every process's next send, claim, nack and renewal
(rule 39). ``tests/backends`` calls this seam
directly on every backend; ``tests/conformance`` goes through the public API.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Protocol

from hailq.backends.base_parts import KEEP as KEEP
from hailq.backends.base_parts import SLOT as SLOT
from hailq.backends.base_parts import DeadCountParams as DeadCountParams
from hailq.backends.base_parts import (
    HistoryBackend,
    LevelsBackend,
    OverviewBackend,
    ScheduleBackend,
    UpkeepBackend,
)
from hailq.backends.base_parts import LevelRow as LevelRow
from hailq.backends.base_parts import LevelsReadParams as LevelsReadParams
from hailq.backends.base_parts import LevelsRecordParams as LevelsRecordParams
from hailq.backends.base_parts import OverviewParams as OverviewParams
from hailq.backends.base_parts import PruneParams as PruneParams
from hailq.backends.base_parts import QueueGlanceRows as QueueGlanceRows
from hailq.backends.base_parts import ScheduleDeclareParams as ScheduleDeclareParams
from hailq.backends.base_parts import ScheduleDeleteParams as ScheduleDeleteParams
from hailq.backends.base_parts import ScheduleFireParams as ScheduleFireParams
from hailq.backends.base_parts import SchedulePauseParams as SchedulePauseParams
from hailq.backends.base_parts import ScheduleRow as ScheduleRow
from hailq.backends.base_parts import ScheduleSaveParams as ScheduleSaveParams
from hailq.backends.base_parts import Turn as Turn
from hailq.backends.figure_rows import BucketAdd as BucketAdd
from hailq.backends.figure_rows import FigureRows as FigureRows
from hailq.backends.figure_rows import FiguresReadParams as FiguresReadParams
from hailq.backends.figure_rows import FiguresRecordParams as FiguresRecordParams
from hailq.backends.figure_rows import FiguresWindowParams as FiguresWindowParams
from hailq.backends.figure_rows import Point as Point
from hailq.backends.figure_rows import RangeAdd as RangeAdd
from hailq.backends.figure_rows import RangeRow as RangeRow
from hailq.backends.figure_rows import RateAdd as RateAdd
from hailq.backends.figure_rows import RateSlot as RateSlot
from hailq.backends.figure_rows import SketchAdd as SketchAdd
from hailq.backends.figure_rows import SketchRow as SketchRow
from hailq.backends.operator_params import AutoscaleListParams as AutoscaleListParams
from hailq.backends.operator_params import CancelOutcome as CancelOutcome
from hailq.backends.operator_params import DeleteParams as DeleteParams
from hailq.backends.operator_params import MessageIdRef as MessageIdRef
from hailq.backends.operator_params import MessageRef as MessageRef
from hailq.backends.operator_params import QueueConfigureParams as QueueConfigureParams
from hailq.backends.operator_params import QueueDescribeParams as QueueDescribeParams
from hailq.backends.operator_params import QueuePauseParams as QueuePauseParams
from hailq.backends.operator_params import QueueRef as QueueRef
from hailq.backends.operator_params import SubscriptionDeleteParams as SubscriptionDeleteParams
from hailq.backends.operator_params import TopicRef as TopicRef
from hailq.backends.operator_params import WorkerPruneParams as WorkerPruneParams
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

if TYPE_CHECKING:
    from hailq.joined import Place


class NewMessage(NamedTuple):
    """One message to insert, already validated and encoded (a named tuple: built once
    per message sent, where a frozen dataclass's construction cost three times as much)."""

    queue: str
    id: str
    body: bytes
    body_kind: int
    headers: str | None
    priority: int
    ordering_key: str | None
    delay: float
    dedup_id: str | None
    # No settings ride along (rule 39): the dedup window, aging and deadline targets are
    # read from the queue's row by the statements that apply them.


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
    # Who claims (rule 40's history records it with each attempt of a retaining queue):
    # "worker host:pid", "HTTP client"; None: "library". A tuple names who runs each
    # message claimed, in rule 16's order (a worker's slots: "worker host:pid slot 2").
    consumer: str | tuple[str, ...] | None = None


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
    # None: the queue's retry policy for the attempt, read by the statement (rule 39).
    delay: float | None = None


@dataclass(frozen=True, slots=True)
class ExtendParams:
    receipts: Sequence[Receipt]
    seconds: float | None = None  # None: the queue's lease as its row holds it now


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
class CancelledParams:
    """Leases of one queue whose messages may have been cancelled (rule 40)."""

    queue: str
    receipts: Sequence[Receipt]


@dataclass(frozen=True, slots=True)
class AckTransactionParams:
    receipt: Receipt


BuildCopies = Callable[[list[Subscription]], list[NewMessage]]


@dataclass(frozen=True, slots=True)
class PublishParams:
    topic: str
    build: BuildCopies  # called with the subscriptions read inside the transaction
    connection: Any = None


class Backend(ScheduleBackend, OverviewBackend, LevelsBackend, HistoryBackend, UpkeepBackend,
              Protocol):
    """Storage for hailq. Times are seconds since the epoch on the backend's clock.
    The parts for periodic schedules, the overview and queue levels (their params,
    rows and Protocols): ``hailq/backends/base_parts.py``."""

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

    def queue_get(self, params: QueueRef) -> str | None:
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

    def queue_delete(self, params: DeleteParams) -> int:
        """Delete a queue with everything it owns, its subscriptions included; return how
        many messages went with it. QueueNotEmpty (nothing deleted) if it holds messages
        and not ``force``; QueueNotFound if there is no queue."""
        ...

    def queue_maintain(self, params: QueueRef) -> None:
        """Upkeep without a claim: due messages become ready, ended leases return their
        message or kill it after its last attempt (rule 13)."""
        ...

    def queue_stats(self, params: QueueRef) -> QueueStats:
        """Counts as the next receive would find them; a read, it writes nothing."""
        ...

    def message_send(self, params: SendParams) -> list[str]:
        """Insert atomically; a dedup hit returns the earlier id and inserts nothing.
        With a connection the insert joins that transaction and commits with it."""
        ...

    def caller_place(self) -> Place:
        """What a send on a caller's own connection needs (``hailq/joined.py``): the
        statements it runs there, and this database's instance id to check it by."""
        ...

    def message_claim(self, params: ClaimParams) -> ClaimResult:
        """Ack ``params.acks``, then lease up to ``max_messages`` in rule-16 order (ended
        leases and due messages settled first), in one transaction where it can."""
        ...

    def message_ack(self, params: AckParams) -> list[bool | None]:
        """Delete each message whose lease its receipt names, in one transaction.
        Per receipt: ``False`` acked in time, ``True`` a late ack, ``None`` lease lost."""
        ...

    def message_ack_transaction(self, params: AckTransactionParams,
                                ) -> AbstractContextManager[Any]:
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

    def message_get(self, params: MessageRef) -> MessageDetails | None:
        """One message by id as the next receive would find it; a read."""
        ...

    def message_delete(self, params: MessageRef) -> bool:
        """Delete one message whatever its state (counted as purged, its key's next
        message freed); False if the queue holds no such message."""
        ...

    def message_cancel(self, params: MessageRef) -> CancelOutcome:
        """Cancel one message by id (rule 40): a waiting one (ready, delayed or behind
        its key) is removed; a running one keeps its lease (its max_in_flight slot, its
        key) while no receipt acks, nacks or extends it any more. MessageNotFound,
        nothing written, if the queue holds no such live message."""
        ...

    def message_locate(self, params: MessageIdRef) -> str | None:
        """The queue of a live (not dead) message by id alone, None if there is none;
        a read."""
        ...

    def message_cancelled(self, params: CancelledParams) -> list[str]:
        """The ids among these leases' messages that were cancelled while running; a
        read (a worker's poll of its messages in flight)."""
        ...

    def message_cancel_settle(self, params: CancelledParams) -> list[str]:
        """Remove the cancelled messages these leases held, their handlers having
        stopped: their slots and keys are freed. Their ids; others are left alone."""
        ...

    def dead_list(self, params: DeadListParams) -> list[DeadMessage]: ...

    def dead_redrive(self, params: RedriveParams) -> int: ...

    def topic_save(self, params: TopicRef) -> None: ...

    def topic_list(self) -> list[str]: ...

    def topic_delete(self, params: DeleteParams) -> int:
        """Delete a topic; return how many subscriptions were removed with it (their
        queues stay). TopicHasSubscriptions if it has any and not ``force``;
        TopicNotFound if there is no topic."""
        ...

    def topic_publish(self, params: PublishParams) -> list[str]:
        """Read the subscriptions and insert the copies ``build`` makes, atomically."""
        ...

    def subscription_save(self, subscription: Subscription) -> None: ...

    def subscription_list(self, params: TopicRef) -> list[Subscription]: ...

    def subscription_delete(self, params: SubscriptionDeleteParams) -> bool:
        """Stop copying the topic's messages into the queue (the queue stays); False if
        it was no subscription of the topic."""
        ...

    def worker_save(self, worker: WorkerInfo) -> None:
        """Record a worker's heartbeat; ``last_seen`` is set to the backend's clock."""
        ...

    def worker_list(self) -> list[WorkerInfo]: ...

    def worker_prune(self, params: WorkerPruneParams) -> int:
        """Forget workers not seen since ``params.before``; return how many."""
        ...

    def figures_record(self, params: FiguresRecordParams) -> None:
        """Add a process's batched figures (histogram buckets, slot rates, samples)."""
        ...

    def figures_read(self, params: FiguresReadParams) -> FigureRows:
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

    def autoscale_list(self, params: AutoscaleListParams) -> list[AutoscalerInfo]:
        """Decisions at ``since`` or later of ``queue``'s autoscalers (None: every queue):
        the last ``limit`` newest first, or without ``limit`` each one's last."""
        ...

    def close(self) -> None: ...
