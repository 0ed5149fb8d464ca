"""Queues and received messages: the public API over the backend seam (SPEC rules 1-18)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from hailq._time import Duration, seconds
from hailq.backends.base import (
    AckParams,
    ClaimedRow,
    ClaimParams,
    DeadListParams,
    ExtendParams,
    NackParams,
    NewMessage,
    RedriveParams,
)
from hailq.codec import (
    Body,
    check_key,
    check_plain_text,
    decode_body,
    decode_headers,
    encode_body,
    encode_headers,
    storable_text,
)
from hailq.errors import InvalidArgument, LeaseLost
from hailq.ids import check_message_id, make_receipt, new_message_id, parse_receipt
from hailq.models import DeadMessage, PeekedMessage, QueueStats
from hailq.policy.retry import backoff
from hailq.settings import QueueSettings

if TYPE_CHECKING:
    from hailq.backends.base import Backend

MAX_BATCH = 1000
MAX_ERROR_LENGTH = 4000
MAX_WAIT = 3600.0


@dataclass(frozen=True)
class Envelope:
    """A body with its own send options, for ``send_many`` and ``publish``."""

    body: Body
    priority: int = 0
    ordering_key: str | None = None
    delay: Duration = 0
    headers: dict[str, str] | None = None
    dedup_id: str | None = None
    not_before: datetime | float | None = field(default=None)


class Message:
    """A received message and its lease. ``receipt`` names this lease alone."""

    __slots__ = ("_queue", "_receipt", "_seq", "_token", "attempt", "body", "enqueued_at",
                 "headers", "id", "lease_until", "ordering_key", "priority", "settled")

    def __init__(self, queue: Queue, *, id: str, body: Body, headers: dict[str, str],
                 priority: int, ordering_key: str | None, attempt: int, enqueued_at: float,
                 lease_until: float, receipt: str, seq: int | None = None) -> None:
        _, self._token, named_seq = parse_receipt(receipt)  # acks send id, token and seq
        self._queue = queue
        self._seq = named_seq if seq is None else seq
        self.id = id
        self.body = body
        self.headers = headers
        self.priority = priority
        self.ordering_key = ordering_key
        self.attempt = attempt
        self.enqueued_at = enqueued_at
        self.lease_until = lease_until
        self._receipt: str | None = receipt
        self.settled = False  # acked, nacked or dead-lettered through this object

    @classmethod
    def _claimed(cls, queue: Queue, r: ClaimedRow) -> Message:
        """From a claimed row, without ``__init__``'s keywords: receive builds one per
        message, and at batch sizes of 10 and more this is a visible share of a cycle."""
        m = cls.__new__(cls)
        m._queue, m._seq, m._token, m.id = queue, r.seq, r.token, r.id
        m.body = decode_body(r.body, r.body_kind)
        m.headers = decode_headers(r.headers)
        m.priority, m.ordering_key, m.attempt = r.priority, r.ordering_key, r.attempt
        m.enqueued_at, m.lease_until = r.enqueued_at, r.lease_until
        m._receipt = None  # written when first asked for: acks of a Message do not need it
        m.settled = False
        return m

    @property
    def receipt(self) -> str:
        """The receipt of this lease, a plain string: ``queue.ack(receipt)`` works later."""
        if self._receipt is None:
            self._receipt = make_receipt(self.id, self._token, self._seq)
        return self._receipt

    @property
    def queue(self) -> str:
        """The name of the queue it was received from."""
        return self._queue.name

    @property
    def source(self) -> Queue:
        """The ``Queue`` it was received from."""
        return self._queue

    def ack(self) -> None:
        """Remove the message for good. Raises LeaseLost if it was received again since."""
        self._queue.ack(self)
        self.settled = True

    def nack(self, delay: Duration | None = None, error: str | None = None) -> None:
        """Give the message back now, after ``delay``, or after the queue's retry backoff."""
        self._queue.nack(self.receipt, delay=delay, error=error, attempt=self.attempt)
        self.settled = True

    def give_back(self, reason: str | None = None) -> None:
        """Return the message now, untried: a consumer that stops before its work is done
        (a worker's shutdown) gives it back. Unlike ``nack`` this is no failure: the
        message keeps its place in line and never dies of it, even on its last attempt
        (the attempt still counts, so the next delivery may show one more than
        ``max_attempts``). Raises LeaseLost as ``nack`` does."""
        self._queue.give_back(self.receipt, reason)
        self.settled = True

    def dead_letter(self, reason: str) -> None:
        """Move the message to the dead-letter queue now, whatever attempts it has left."""
        self._queue.dead_letter(self.receipt, reason)
        self.settled = True

    def extend(self, seconds: Duration) -> None:
        """Move the lease's end to ``seconds`` from now."""
        self.lease_until = self._queue.extend(self.receipt, seconds)

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        """Commit an effect in the broker's database together with the ack (rule 22).

        Yields a database connection (``sqlite3.Connection`` or psycopg
        ``Connection``) inside a transaction in which the message is already
        acked. Leaving the block commits both; an exception rolls both back. If
        the lease was lost, ``LeaseLost`` is raised before the block runs and
        nothing is committed. Do not commit inside the block.
        """
        with self._queue.ack_transaction(self) as conn:
            yield conn
        self.settled = True

    def __repr__(self) -> str:
        return (f"<Message {self.id} queue={self.queue} attempt={self.attempt} "
                f"priority={self.priority}>")


class Queue:
    """A named, durable queue. Get one with ``broker.queue(name, **settings)``."""

    def __init__(self, backend: Backend, name: str, settings: QueueSettings) -> None:
        self._backend = backend
        self.name = name
        self.settings = settings

    # -- sending -----------------------------------------------------------------------

    def send(self, body: Body, priority: int = 0, ordering_key: str | None = None,
             delay: Duration = 0, headers: dict[str, str] | None = None,
             dedup_id: str | None = None, *, not_before: datetime | float | None = None,
             connection: Any = None) -> str:
        """Enqueue one message; return its id once it is durable (rule 2).

        With ``dedup_id`` seen on this queue within ``dedup_window``, return the
        first message's id and enqueue nothing (rule 4). With ``connection``, the
        message joins that open transaction on the broker's database (rule 3).
        """
        message = self._new(Envelope(body, priority, ordering_key, delay, headers, dedup_id,
                                     not_before))
        return self._backend.message_insert([message], connection)[0]

    def send_many(self, items: Iterable[Body | Envelope], *, connection: Any = None,
                  ) -> list[str]:
        """Enqueue a batch atomically, all or none; items are bodies or ``Envelope``s."""
        messages = [self._new(i if isinstance(i, Envelope) else Envelope(i))
                    for i in check_batch(items, "send_many")]
        if not messages:
            return []
        return self._backend.message_insert(messages, connection)

    def _new(self, e: Envelope) -> NewMessage:
        return build_message(self.name, self.settings, e, self._backend.clock_now)

    # -- receiving ---------------------------------------------------------------------

    def receive(self, max_messages: int = 1, lease: Duration | None = None,
                wait: Duration = 0) -> list[Message]:
        """Lease up to ``max_messages`` (rule 6). ``wait`` > 0 long-polls up to that long."""
        wait_s = seconds(wait, "wait", maximum=MAX_WAIT)
        params = self._claim_params(_max_messages(max_messages), self._lease(lease))
        deadline = time.monotonic() + wait_s
        while True:
            rows = self._backend.message_claim(params)
            remaining = deadline - time.monotonic()
            if rows or remaining <= 0:
                break
            self._backend.message_wait([self.name], remaining)
        return self._messages(rows)

    def ack_and_receive(self, acks: Iterable[Message], max_messages: int = 1,
                        lease: Duration | None = None,
                        ) -> tuple[list[bool | None], list[Message]]:
        """Ack ``acks`` (messages of any queues of this broker) and lease up to
        ``max_messages`` of this queue, in one transaction where the backend allows:
        finished work is never still leased when new work arrives. Returns the acks'
        results (as ``ack_many``) and the received messages (as ``receive``, no wait)."""
        finished = list(acks)
        params = self._claim_params(_max_messages(max_messages), self._lease(lease))
        results, rows = self._backend.message_ack_claim(
            [m.source._ack_params(m) for m in finished], params)
        for message, result in zip(finished, results, strict=True):
            if result is not None:
                message.settled = True
        return results, self._messages(rows)

    def _messages(self, rows: list[ClaimedRow]) -> list[Message]:
        return [Message._claimed(self, r) for r in rows]

    def _lease(self, lease: Duration | None) -> float:
        if lease is None:
            return self.settings.lease
        return seconds(lease, "lease", allow_zero=False, maximum=12 * 3600)

    def ack(self, receipt: str | Message) -> None:
        """Ack by receipt or message (see ``Message.ack``)."""
        if self.ack_many([receipt])[0] is None:
            text = receipt.receipt if isinstance(receipt, Message) else receipt
            raise LeaseLost(f"receipt {text} no longer holds the lease of its message "
                            "(received again since, already gone, or a receipt of another "
                            "queue); nothing changed")

    def ack_many(self, receipts: Iterable[str | Message]) -> list[bool | None]:
        """Ack several leases in one transaction.

        Per receipt: ``False`` acked in time, ``True`` a late ack (the lease had
        ended but nobody received the message since), ``None`` lease lost.
        """
        items = check_batch(receipts, "ack_many")
        acks = [self._ack_params(r) for r in items]
        results = self._backend.message_ack(acks) if acks else []
        for item, result in zip(items, results, strict=True):
            if isinstance(item, Message) and result is not None:
                item.settled = True
        return results

    def _ack_params(self, item: str | Message) -> AckParams:
        if isinstance(item, Message):  # its own fields: no receipt to parse
            return AckParams(self.name, item.id, item._token, self.settings.on_dead,
                             item.ordering_key, True, item._seq, self._capped)
        message_id, token, seq = parse_receipt(item)
        return AckParams(self.name, message_id, token, self.settings.on_dead, seq=seq,
                         wake=self._capped)

    @property
    def _capped(self) -> bool:
        return self.settings.max_in_flight is not None

    @contextmanager
    def ack_transaction(self, receipt: str | Message) -> Iterator[Any]:
        """See ``Message.transaction``."""
        with self._backend.message_ack_transaction(self._ack_params(receipt)) as conn:
            yield conn

    def nack(self, receipt: str, delay: Duration | None = None, error: str | None = None,
             *, attempt: int | None = None) -> None:
        """Give a leased message back (rule 10); after ``max_attempts`` it goes dead.

        Without ``delay`` the wait is the retry backoff of the message's attempt:
        ``attempt`` when the caller knows it (``Message.nack``), else read first."""
        message_id, token, seq = parse_receipt(receipt)
        text = _error_text(error)
        if delay is not None:
            wait = seconds(delay, "delay")
        else:
            if attempt is None:  # a bare receipt: the backoff grows with the attempt
                attempt = self._backend.message_attempt(self.name, message_id, token, seq)
                if attempt is None:
                    raise LeaseLost(f"message {message_id}: the receipt no longer holds its "
                                    "lease; nothing changed")
            wait = backoff(self.settings.retry, attempt)
        self._nack(NackParams(self.name, message_id, token, wait, text,
                              self.settings.max_attempts, self.settings.aging,
                              self.settings.on_dead, seq=seq, wake=self._capped))

    def give_back(self, receipt: str, reason: str | None = None) -> None:
        """See ``Message.give_back``."""
        message_id, token, seq = parse_receipt(receipt)
        # A nack that cannot kill a held lease (spare) and keeps the sort key (as a queue
        # without aging does): the message was not tried, only returned.
        self._nack(NackParams(self.name, message_id, token, 0.0,
                              _error_text(reason, "reason") or "given back untried",
                              self.settings.max_attempts, None, self.settings.on_dead,
                              seq=seq, wake=self._capped, spare=True))

    def dead_letter(self, receipt: str, reason: str) -> None:
        """Dead-letter a leased message now with ``reason``."""
        if not isinstance(reason, str):
            raise InvalidArgument(f"reason must be a string, got {type(reason).__name__}")
        message_id, token, seq = parse_receipt(receipt)
        self._nack(NackParams(self.name, message_id, token, 0.0, _error_text(reason, "reason"),
                              self.settings.max_attempts, self.settings.aging,
                              self.settings.on_dead, dead=True, seq=seq,
                              wake=self._capped))

    def _nack(self, params: NackParams) -> None:
        if not self._backend.message_nack(params):
            raise LeaseLost(f"message {params.message_id}: the receipt no longer holds its "
                            "lease; nothing changed")

    def extend(self, receipt: str, seconds_: Duration) -> float:
        """Move a lease's end to ``seconds_`` from now; return the new deadline."""
        until = self.extend_many([receipt], seconds_)[0]
        if until is None:
            raise LeaseLost(f"receipt {receipt}: it no longer holds its message's lease")
        return until

    def extend_many(self, receipts: Iterable[str | Message], seconds_: Duration,
                    ) -> list[float | None]:
        """Extend several leases in one transaction; per lease the new deadline or None
        (lease lost). Messages given as ``Message`` get their ``lease_until`` updated."""
        span = seconds(seconds_, "extend seconds", allow_zero=False, maximum=12 * 3600)
        items = check_batch(receipts, "extend_many")
        params = []
        for item in items:
            message_id, token, seq = parse_receipt(
                item.receipt if isinstance(item, Message) else item)
            params.append(ExtendParams(self.name, message_id, token, span,
                                       self.settings.max_attempts, seq))
        results = self._backend.message_extend(params) if params else []
        for item, until in zip(items, results, strict=True):
            if isinstance(item, Message) and until is not None:
                item.lease_until = until
        return results

    # -- operators ---------------------------------------------------------------------

    def maintain(self) -> None:
        """Settle what time alone changed, as consumers do when they receive: due
        messages become ready, ended leases return their message or kill it after its
        last attempt (rule 13). Reads never need this; ``Broker.maintain`` runs it for
        every queue."""
        self._upkeep()

    def _upkeep(self) -> None:
        """End leases that ran out and release due messages, so operators see the truth
        (a message whose last lease ended is dead now, not at the next receive)."""
        self._backend.queue_upkeep(self._claim_params(1, self.settings.lease))

    def _claim_params(self, max_messages: int, lease: float) -> ClaimParams:
        return ClaimParams(self.name, max_messages, lease, self.settings.max_attempts,
                           self.settings.max_in_flight, self.settings.on_dead)

    def peek(self, limit: int = 10) -> list[PeekedMessage]:
        """Look at live messages in delivery order without leasing them."""
        return self._backend.message_peek(self.name, _limit(limit))

    def dead_letters(self, error_contains: str | None = None,
                     older_than: Duration | None = None, ordering_key: str | None = None,
                     limit: int = 1000) -> list[DeadMessage]:
        """Dead messages, oldest death first, each with the error of every attempt."""
        if error_contains is not None:
            if not isinstance(error_contains, str):
                raise InvalidArgument("error_contains must be a string")
            check_plain_text(error_contains, "error_contains")
        params = DeadListParams(
            self.name, error_contains,
            None if older_than is None else seconds(older_than, "older_than"),
            check_key(ordering_key, "ordering_key"), _limit(limit))
        return self._backend.dead_list(params)

    def redrive(self, ids: Iterable[str] | None = None) -> int:
        """Return dead messages (all, or these ids) to ready with attempt 0, in key order."""
        chosen = None if ids is None else [check_message_id(i) for i in check_batch(ids, "redrive")]
        self._upkeep()
        return self._backend.dead_redrive(RedriveParams(self.name, chosen, self.settings.aging))

    def purge(self, dead: bool = False) -> int:
        """Delete every live message (ready, delayed, blocked and leased ones), or with
        ``dead=True`` the dead letters instead; return how many were deleted."""
        if not isinstance(dead, bool):
            raise InvalidArgument("dead must be True or False")
        self._upkeep()
        return self._backend.message_purge(self.name, dead)

    def stats(self) -> QueueStats:
        """Counts and totals as the next receive would find them (an ended lease counts as
        ready, or dead after its last attempt); a read: it writes nothing."""
        return self._backend.queue_stats(self.name)

    def __repr__(self) -> str:
        return f"<Queue {self.name}>"


def build_message(queue: str, settings: QueueSettings, e: Envelope,
                  now: Any) -> NewMessage:
    """Validate one outgoing message against a queue's settings and encode it."""
    if isinstance(e.priority, bool) or not isinstance(e.priority, int) \
            or not 0 <= e.priority <= 9:
        raise InvalidArgument(f"priority must be an integer from 0 to 9, got {e.priority!r}")
    delay = seconds(e.delay, "delay", maximum=366 * 86400)
    if e.not_before is not None:
        if delay:
            raise InvalidArgument("give delay or not_before, not both")
        delay = _until(e.not_before, now)
    data, kind = encode_body(e.body, settings.max_message_size)
    return NewMessage(
        queue=queue, id=new_message_id(), body=data, body_kind=kind,
        headers=encode_headers(e.headers), priority=e.priority,
        ordering_key=check_key(e.ordering_key, "ordering_key"), delay=delay,
        dedup_id=check_key(e.dedup_id, "dedup_id"), dedup_window=settings.dedup_window,
        aging=settings.aging,
    )


def _until(when: datetime | float, now: Any) -> float:
    if isinstance(when, datetime):
        if when.tzinfo is None:
            raise InvalidArgument("not_before must be timezone-aware (e.g. datetime.now(UTC))")
        target = when.timestamp()
    elif isinstance(when, int | float) and not isinstance(when, bool):
        target = float(when)
    else:
        raise InvalidArgument(f"not_before must be a datetime or epoch seconds, got {when!r}")
    return seconds(max(target - float(now()), 0.0), "not_before", maximum=366 * 86400)


def _error_text(error: object, what: str = "error") -> str | None:
    if error is None:
        return None
    if not isinstance(error, str):
        raise InvalidArgument(f"{what} must be a string, got {type(error).__name__}")
    return storable_text(error[:MAX_ERROR_LENGTH])


def check_batch(items: object, what: str) -> list[Any]:
    """A batch argument as a list: any iterable of items, but not one item by itself
    (a string, bytes or a dict is iterable, and would quietly become many)."""
    if isinstance(items, str | bytes | bytearray | memoryview | dict) \
            or not isinstance(items, Iterable):
        raise InvalidArgument(f"{what} takes a list (or another iterable) of items, got "
                              f"{type(items).__name__}; put a single item in a list")
    return list(items)


def _max_messages(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_BATCH:
        raise InvalidArgument(f"max_messages must be an integer from 1 to {MAX_BATCH}, "
                              f"got {value!r}")
    return value


def _limit(limit: object) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 100_000:
        raise InvalidArgument(f"limit must be an integer from 1 to 100000, got {limit!r}")
    return limit

