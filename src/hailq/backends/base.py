"""The seam between queue semantics and storage.

Each method is named entity-then-verb and takes one small params object.
Every backend passes the same conformance suite (``tests/conformance``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from hailq.models import DeadMessage, PeekedMessage, QueueStats, Subscription, WorkerInfo


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


class ClaimParams(NamedTuple):
    """What a receive asks for (a tuple: built on every receive)."""

    queue: str
    max_messages: int
    lease: float
    max_attempts: int
    max_in_flight: int | None
    on_dead: str


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
    seq: int  # the row's position: lets the receiver's ack find it without an id lookup
    sort_key: float  # rule 16's order, with seq: a claim's rows are sorted by these two

    @classmethod
    def from_returning(cls, row: Sequence[Any]) -> ClaimedRow:
        """From a claim's RETURNING row, whose columns come in this class's order."""
        return tuple.__new__(cls, row)


def delivery_order(row: Sequence[Any]) -> tuple[Any, Any]:
    """The sort key of a claim's RETURNING row (``sort_key, seq``): RETURNING has no order."""
    return row[11], row[10]


class AckParams(NamedTuple):
    queue: str
    message_id: str
    token: str
    on_dead: str
    # What the receiver saw: lets a backend take a fast path for messages without a key.
    ordering_key: str | None = None
    key_known: bool = False
    seq: int | None = None  # the row's position, when the receiver knows it
    # The queue has max_in_flight: a settled message makes room that receivers waiting
    # on the cap must hear about (a backend that wakes them only for new messages).
    wake: bool = False


@dataclass(frozen=True, slots=True)
class NackParams:
    queue: str
    message_id: str
    token: str
    delay: float
    error: str | None
    max_attempts: int
    aging: float | None
    on_dead: str
    dead: bool = False  # dead-letter now, whatever the attempts left
    seq: int | None = None  # the row's position, when the receipt names it
    wake: bool = False  # as AckParams.wake
    # A give-back: a lease that still holds is returned untried and never dead-lettered,
    # whatever the attempts; one that ended on the last attempt is not found (rule 13).
    spare: bool = False


@dataclass(frozen=True, slots=True)
class ExtendParams:
    queue: str
    message_id: str
    token: str
    seconds: float
    max_attempts: int  # a lease that ended on the last attempt is a dead message's
    seq: int | None = None  # the row's position, when the receipt names it


@dataclass(frozen=True, slots=True)
class DeadListParams:
    queue: str
    error_contains: str | None = None
    older_than: float | None = None
    ordering_key: str | None = None
    limit: int = 1000


@dataclass(frozen=True, slots=True)
class RedriveParams:
    queue: str
    ids: Sequence[str] | None
    aging: float | None


BuildCopies = Callable[[list[Subscription]], list[NewMessage]]


class Backend(Protocol):
    """Storage for hailq. Times are seconds since the epoch on the backend's clock."""

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

    def queue_save(self, name: str, settings_json: str, aging: float | None,
                   resort: bool) -> None:
        """Store a queue's settings; with ``resort`` (its aging changed), in the same
        transaction recompute the sort keys of its live messages for ``aging``."""
        ...

    def queue_load(self, name: str) -> str | None: ...

    def queue_list(self) -> list[tuple[str, str]]: ...

    def message_insert(self, messages: Sequence[NewMessage],
                       connection: Any = None) -> list[str]:
        """Insert atomically; a dedup hit returns the earlier id and inserts nothing.

        With ``connection`` (a caller's open transaction on the same database)
        the insert joins that transaction and nothing is committed here.
        """
        ...

    def message_claim(self, params: ClaimParams) -> list[ClaimedRow]:
        """Lease up to ``max_messages`` in rule-16 order; reclaim ended leases first."""
        ...

    def message_ack_claim(self, acks: Sequence[AckParams], params: ClaimParams,
                          ) -> tuple[list[bool | None], list[ClaimedRow]]:
        """``message_ack(acks)`` then ``message_claim(params)`` together: one transaction
        where the backend can, so finished work is acked before new work is leased at the
        cost of one commit."""
        ...

    def queue_upkeep(self, params: ClaimParams) -> None:
        """The claim's upkeep without the claim: due messages become ready, ended leases
        return their message or kill it (rule 13). ``max_messages`` is not used."""
        ...

    def message_ack(self, acks: Sequence[AckParams]) -> list[bool | None]:
        """Delete each message whose lease the token names, in one transaction.

        Per ack: ``False`` acked in time, ``True`` a late ack, ``None`` lease lost.
        """
        ...

    def message_ack_transaction(self, ack: AckParams) -> AbstractContextManager[Any]:
        """Yield a connection in a transaction that commits the caller's effect with the ack.

        Raises LeaseLost (and rolls everything back) if the lease was lost.
        """
        ...

    def message_nack(self, params: NackParams) -> bool:
        """Give the message back (or dead-letter it); False if the lease was lost."""
        ...

    def message_attempt(self, queue: str, message_id: str, token: str,
                        seq: int | None) -> int | None:
        """The attempt of the lease the receipt names, or None if it no longer holds it
        (the attempt changes only with a new lease, so it stays right for this one)."""
        ...

    def message_extend(self, extends: Sequence[ExtendParams]) -> list[float | None]:
        """Move each lease's end, in one transaction; per lease the new deadline, or None
        if the lease was lost."""
        ...

    def message_peek(self, queue: str, limit: int) -> list[PeekedMessage]: ...

    def message_wait(self, queues: Sequence[str], timeout: float) -> None:
        """Block until a message may have become receivable in one of ``queues``, or
        ``timeout``. May return early; callers claim again and wait again."""
        ...

    def dead_list(self, params: DeadListParams) -> list[DeadMessage]: ...

    def dead_redrive(self, params: RedriveParams) -> int: ...

    def message_purge(self, queue: str, dead: bool) -> int:
        """Delete dead messages (``dead=True``) or every live one, leased ones included."""
        ...

    def queue_stats(self, queue: str) -> QueueStats: ...

    def topic_save(self, topic: str) -> None: ...

    def topic_list(self) -> list[str]: ...

    def subscription_save(self, subscription: Subscription) -> None: ...

    def subscription_list(self, topic: str) -> list[Subscription]: ...

    def topic_publish(self, topic: str, build: BuildCopies,
                      connection: Any = None) -> list[str]:
        """Read the subscriptions and insert ``build(subscriptions)`` in one transaction;
        with ``connection``, in the caller's open transaction (committed by the caller)."""
        ...

    def worker_save(self, worker: WorkerInfo) -> None:
        """Record a worker's heartbeat; ``last_seen`` is set to the backend's clock."""
        ...

    def worker_list(self) -> list[WorkerInfo]: ...

    def worker_prune(self, before: float) -> int:
        """Forget workers not seen since ``before``; return how many."""
        ...

    def close(self) -> None: ...

