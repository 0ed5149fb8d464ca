"""Queues: the public API over the storage seam (SPEC rules 1-18)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Coroutine, Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, overload

from hailq._time import Duration, seconds
from hailq.backends.base import (
    AckParams,
    AckTransactionParams,
    CancelledParams,
    ClaimParams,
    ExtendParams,
    NackOutcome,
    NackParams,
    NewMessage,
    Receipt,
    SendParams,
    WaitParams,
)
from hailq.checks import (
    MAX_BATCH,
    MAX_LEASE,
    MAX_WAIT,
    Envelope,
    build_message,
    check_batch,
    check_max_messages,
    error_text,
)
from hailq.codec import Body
from hailq.committer import committer_for
from hailq.errors import InvalidArgument, LeaseLost, MessageCancelled
from hailq.hooks import Hook, sending
from hailq.ids import parse_receipt
from hailq.joined import is_async, send_joined_async
from hailq.message import Message
from hailq.observe import inbox_use
from hailq.queue_ops import QueueOperations
from hailq.settings import QueueSettings

if TYPE_CHECKING:
    from hailq.backends.base import Backend, ClaimedRow
    from hailq.connections import AsyncCaller
    from hailq.observe.recorder import FigureRecorder

__all__ = ["MAX_BATCH", "Envelope", "Message", "Queue", "build_message", "check_batch"]


class Queue(QueueOperations):
    """A named, durable queue. Get one with ``broker.queue(name, **settings)``.

    ``settings`` are the effective settings (declared, with an operator's
    ``overrides`` laid over them) as this object last read them, for display.
    What sends, claims, nacks and renewals obey (aging, targets, dedup window,
    largest body, lease, attempts, cap, retry policy, dead-letter policy, a
    pause) is read from the database where each statement runs, so an
    operator's change reaches every process within a second (rule 39).
    """

    def __init__(self, backend: Backend, name: str, settings: QueueSettings,
                 overrides: dict[str, Any] | None = None,
                 recorder: FigureRecorder | None = None,
                 hooks: list[Hook] | None = None) -> None:
        self._backend = backend
        # The broker's send hooks (hailq/hooks.py), shared: a hook added later applies.
        self._hooks: list[Hook] = hooks if hooks is not None else []
        self.name = name
        self.settings = settings
        self.overrides: dict[str, Any] = dict(overrides or {})
        # The broker's recorder (rule 36): every claim, ack and nack here is counted.
        self.recorder = recorder
        self._committer = committer_for(backend)  # the broker's: shared by its queues
        # Who receives through this object, as history records each attempt (rule 40):
        # a worker says "worker host:pid" (and its fetcher adds the slot of each message
        # through ``ack_and_receive``), the HTTP API "HTTP client"; None: "library".
        self.consumer: str | None = None

    # -- sending -----------------------------------------------------------------------

    @overload
    def send(self, body: Body, priority: int = 0, ordering_key: str | None = None,
             delay: Duration = 0, headers: dict[str, str] | None = None,
             dedup_id: str | None = None, *, not_before: datetime | float | None = None,
             connection: AsyncCaller) -> Awaitable[str]: ...
    @overload
    def send(self, body: Body, priority: int = 0, ordering_key: str | None = None,
             delay: Duration = 0, headers: dict[str, str] | None = None,
             dedup_id: str | None = None, *, not_before: datetime | float | None = None,
             connection: Any = None) -> str: ...
    def send(self, body: Body, priority: int = 0, ordering_key: str | None = None,
             delay: Duration = 0, headers: dict[str, str] | None = None,
             dedup_id: str | None = None, *, not_before: datetime | float | None = None,
             connection: Any = None) -> Any:
        """Enqueue one message; return its id once it is durable (rule 2).

        With ``dedup_id`` seen on this queue within ``dedup_window``, return the
        first message's id and enqueue nothing (rule 4). With ``connection``, the
        message joins that open transaction on the broker's database (rules 3, 38):
        any connection ``hailq.inbox`` accepts; on an asyncio one (psycopg's
        ``AsyncConnection``, asyncpg, SQLAlchemy's ``AsyncConnection`` or
        ``AsyncSession``) the call returns an awaitable: ``await q.send(...)``.
        """
        envelope = Envelope(body, priority, ordering_key, delay, headers, dedup_id, not_before)
        if connection is not None and is_async(connection):
            return _first(self._send_awaited([envelope], connection))
        if self._hooks:
            return self._send_hooked([envelope], connection)[0]
        sent = self._store([self._new(envelope)], connection)[0]
        if self.recorder is not None:
            self.recorder.touched(self.name)  # its counters are sampled (rates, rule 36)
        return sent

    @overload
    def send_many(self, items: Iterable[Body | Envelope], *, connection: AsyncCaller,
                  ) -> Awaitable[list[str]]: ...
    @overload
    def send_many(self, items: Iterable[Body | Envelope], *, connection: Any = None,
                  ) -> list[str]: ...
    def send_many(self, items: Iterable[Body | Envelope], *, connection: Any = None,
                  ) -> Any:
        """Enqueue a batch atomically, all or none; items are bodies or ``Envelope``s.
        ``connection`` as for ``send`` (awaited on an asyncio connection)."""
        envelopes = [i if isinstance(i, Envelope) else Envelope(i)
                     for i in check_batch(items, "send_many")]
        if connection is not None and is_async(connection):
            return self._send_awaited(envelopes, connection)
        if not envelopes:
            return []
        if self._hooks:
            return self._send_hooked(envelopes, connection)
        sent = self._store([self._new(e) for e in envelopes], connection)
        if self.recorder is not None:
            self.recorder.touched(self.name)
        return sent

    def _send_hooked(self, envelopes: list[Envelope], connection: Any) -> list[str]:
        """A send with the broker's send hooks around it (hailq/hooks.py)."""
        with sending(self._hooks, self.name, "send") as call:
            messages = [self._new(replace(e, headers=call.headers(e.headers)))
                        for e in envelopes]
            sent = self._store(messages, connection)
            if self.recorder is not None:
                self.recorder.touched(self.name)
            call.done(sent)
        return sent

    def _store(self, messages: list[NewMessage], connection: Any) -> list[str]:
        """Store now: in the caller's transaction, or durably, sharing a commit with the
        sends of other threads in flight (``hailq/committer.py``)."""
        if connection is None:
            return self._committer.send(messages)
        return self._backend.message_send(SendParams(messages, connection))

    def _send_awaited(self, envelopes: list[Envelope], connection: Any,
                      ) -> Coroutine[Any, Any, list[str]]:
        """A send in an asyncio connection's transaction; bad input raises here, before
        anything is awaited."""
        place = self._backend.caller_place()
        messages = [] if self._hooks else [self._new(e) for e in envelopes]

        async def send() -> list[str]:
            if not envelopes:
                return []
            if not self._hooks:
                sent = await send_joined_async(place, connection, messages)
            else:
                with sending(self._hooks, self.name, "send") as call:
                    sent = await send_joined_async(place, connection, [
                        self._new(replace(e, headers=call.headers(e.headers)))
                        for e in envelopes])
                    call.done(sent)
            if self.recorder is not None:
                self.recorder.touched(self.name)
            return sent

        return send()

    def _new(self, e: Envelope) -> NewMessage:
        return build_message(self.name, e, self._backend.clock_now)

    # -- receiving ---------------------------------------------------------------------

    def receive(self, max_messages: int = 1, lease: Duration | None = None,
                wait: Duration = 0) -> list[Message]:
        """Lease up to ``max_messages`` (rule 6). ``wait`` > 0 long-polls up to that long.
        Without ``lease`` the queue's stored lease applies."""
        wait_s = wait_seconds(wait)
        params = ClaimParams(self.name, check_max_messages(max_messages),
                             None if lease is None else _lease(lease), (), self.consumer)
        deadline = time.monotonic() + wait_s
        while True:
            rows = self._backend.message_claim(params).rows
            remaining = deadline - time.monotonic()
            if rows or remaining <= 0:
                break
            self._backend.message_wait(WaitParams([self.name], remaining))
        return self._messages(rows)

    def _messages(self, rows: list[ClaimedRow]) -> list[Message]:
        """Claimed rows as messages, their waits counted (rule 36)."""
        figures = self.recorder
        if figures is None:
            return [Message.claimed(self, r) for r in rows]
        if not rows:
            figures.touched(self.name)  # a claim settles expired leases: sample counters
            return []
        at = figures.claimed(self.name, self.settings.slo, rows)
        return [Message.claimed(self, r, at) for r in rows]

    def ack_and_receive(self, acks: Iterable[Message], max_messages: int = 1,
                        lease: Duration | None = None, *, consumers: Sequence[str] = (),
                        ) -> tuple[list[bool | None], list[Message]]:
        """Ack ``acks`` (messages of any queues of this broker) and lease up to
        ``max_messages`` of this queue, in one transaction where the backend allows:
        finished work is never still leased when new work arrives. Returns the acks'
        results (as ``ack_many``) and the received messages (as ``receive``, no wait).
        ``consumers`` names who runs each message received, in the order they come back
        (a worker's slots), as history records it (rule 40); without, ``consumer``."""
        finished = list(acks)
        result = self._backend.message_claim(ClaimParams(
            self.name, check_max_messages(max_messages), _lease(lease),
            [m.lease for m in finished], tuple(consumers) or self.consumer))
        for message, acked in zip(finished, result.acked, strict=True):
            if acked is not None:
                message.settled = True
        if None in result.acked:
            self._let_cancelled_go([m.lease for m, a in zip(finished, result.acked,
                                                            strict=True) if a is None])
        if finished and self.recorder is not None:
            self._ended(finished, result.acked, ok=True)
        return result.acked, self._messages(result.rows)

    def ack(self, receipt: str | Message) -> None:
        """Ack by receipt or message (see ``Message.ack``)."""
        results, cancelled = self._ack_many(receipts=[receipt])
        if results[0] is None:
            text = receipt.receipt if isinstance(receipt, Message) else receipt
            if cancelled:
                raise MessageCancelled(f"receipt {text}: its message was cancelled by an "
                                       "operator; the ack is refused")
            raise LeaseLost(f"receipt {text} no longer holds the lease of its message "
                            "(received again since, already gone, or a receipt of another "
                            "queue); nothing changed")

    def ack_many(self, receipts: Iterable[str | Message]) -> list[bool | None]:
        """Ack several leases in one transaction.

        Per receipt: ``False`` acked in time, ``True`` a late ack (the lease had
        ended but nobody received the message since), ``None`` lease lost, or the
        message cancelled (rule 40: refused, and the cancelled message let go).
        """
        return self._ack_many(receipts)[0]

    def _ack_many(self, receipts: Iterable[str | Message],
                  ) -> tuple[list[bool | None], list[str]]:
        """``ack_many``, and the ids of the cancelled messages among the refused."""
        items = check_batch(receipts, "ack_many")
        leases = []
        for item in items:  # _receipt, without its frame for a Message of this queue
            lease = item.lease if isinstance(item, Message) else None
            leases.append(lease if lease is not None and lease.queue == self.name
                          else self._receipt(item))
        results = self._backend.message_ack(AckParams(leases)) if leases else []
        for item, result in zip(items, results, strict=True):
            if isinstance(item, Message) and result is not None:
                item.settled = True
        if self.recorder is not None and leases:  # no _ended: a call less per ack
            self.recorder.settled(self, items, results, True)
        cancelled = [] if None not in results else self._let_cancelled_go(
            [lease for lease, r in zip(leases, results, strict=True) if r is None])
        return results, cancelled

    def _let_cancelled_go(self, leases: Sequence[Receipt]) -> list[str]:
        """Refused settlements (rule 40): of these leases, remove the messages an
        operator cancelled, whose handlers have stopped since they tried to settle;
        their ids. One call on the path of refusals only."""
        by_queue: dict[str, list[Receipt]] = {}
        for lease in leases:
            by_queue.setdefault(lease.queue, []).append(lease)
        return [i for queue, group in by_queue.items()
                for i in self._backend.message_cancel_settle(CancelledParams(queue, group))]

    def _ended(self, items: Sequence[str | Message], results: Sequence[bool | None], *,
               ok: bool, inbox: bool = False) -> None:
        """Count the handler times of the settled items (rule 36, ``FigureRecorder``)."""
        if self.recorder is not None:
            self.recorder.settled(self, items, results, ok, inbox)

    def _receipt(self, item: str | Message) -> Receipt:
        """The lease a receipt names, on this queue (a message's own is another queue's
        when it was received elsewhere: the ack then finds nothing, as for any receipt)."""
        if isinstance(item, Message):
            lease = item.lease
            return lease if lease.queue == self.name else lease._replace(queue=self.name)
        message_id, token, seq = parse_receipt(item)
        return Receipt(self.name, message_id, token, seq)

    @contextmanager
    def ack_transaction(self, receipt: str | Message) -> Iterator[Any]:
        """See ``Message.transaction``."""
        lease = self._receipt(receipt)
        # Exactly-once effect (hailq doctor, rule 26): a worker's run counts it as an inbox
        # run when its handler ends; elsewhere it is counted with the ack here.
        in_run = inbox_use.note(lease.message_id)
        with ExitStack() as stack:
            try:
                conn = stack.enter_context(
                    self._backend.message_ack_transaction(AckTransactionParams(lease)))
            except LeaseLost:
                if self._let_cancelled_go([lease]):
                    raise MessageCancelled(f"message {lease.message_id} was cancelled by an "
                                           "operator; the transaction was rolled back") \
                        from None
                raise
            yield conn
        self._ended([receipt], [False], ok=True, inbox=not in_run)  # acked, not late

    def nack(self, receipt: str | Message, delay: Duration | None = None,
             error: str | None = None, *, attempt: int | None = None) -> None:
        """Give a leased message back (rule 10); after ``max_attempts`` it goes dead.

        Without ``delay`` the wait is the queue's retry backoff for the attempt the
        statement finds, its policy read from the queue where the nack runs (rule 39).
        ``attempt`` is accepted for callers written before that, and not needed."""
        del attempt  # the statement reads the message's attempt itself
        lease = self._receipt(receipt)
        text = error_text(error)
        self._nack(receipt, lease, "retry", text,
                   delay=None if delay is None else seconds(delay, "delay"))

    def give_back(self, receipt: str | Message, reason: str | None = None) -> None:
        """See ``Message.give_back``."""
        self._nack(receipt, self._receipt(receipt), "give_back",
                   error_text(reason, "reason") or "given back untried", delay=0.0)

    def dead_letter(self, receipt: str | Message, reason: str) -> None:
        """Dead-letter a leased message now with ``reason``."""
        if not isinstance(reason, str):
            raise InvalidArgument(f"reason must be a string, got {type(reason).__name__}")
        self._nack(receipt, self._receipt(receipt), "dead", error_text(reason, "reason"),
                   delay=0.0)

    def _nack(self, item: str | Message, lease: Receipt, outcome: NackOutcome,
              error: str | None, *, delay: float | None = None) -> None:
        if not self._backend.message_nack(NackParams(lease, error or "nacked", outcome,
                                                     delay)):
            if self._let_cancelled_go([lease]):
                raise MessageCancelled(f"message {lease.message_id} was cancelled by an "
                                       "operator; it is gone, nothing else changed")
            raise LeaseLost(f"message {lease.message_id}: the receipt no longer holds its "
                            "lease; nothing changed")
        if outcome != "give_back":  # given back untried: no handler ran (rule 36)
            self._ended([item], [True], ok=False)

    def extend(self, receipt: str, seconds_: Duration | None = None) -> float:
        """Move a lease's end to ``seconds_`` from now (None: the queue's lease as stored
        now); return the new deadline."""
        until = self.extend_many([receipt], seconds_)[0]
        if until is None:
            lease = self._receipt(receipt)
            if self._backend.message_cancelled(CancelledParams(self.name, [lease])):
                raise MessageCancelled(f"receipt {receipt}: its message was cancelled by an "
                                       "operator; stop its work and settle it")
            raise LeaseLost(f"receipt {receipt}: it no longer holds its message's lease")
        return until

    def extend_many(self, receipts: Iterable[str | Message], seconds_: Duration | None = None,
                    ) -> list[float | None]:
        """Extend several leases in one transaction; per lease the new deadline or None
        (lease lost). Without ``seconds_`` each lease runs the queue's lease as stored
        now, read where it is applied (rule 39): what a worker's renewals use. Messages
        given as ``Message`` get their ``lease_until`` updated."""
        span = None if seconds_ is None else seconds(seconds_, "extend seconds",
                                                     allow_zero=False, maximum=MAX_LEASE)
        items = check_batch(receipts, "extend_many")
        leases = [self._receipt(i) for i in items]
        results = self._backend.message_extend(ExtendParams(leases, span)) if leases else []
        for item, until in zip(items, results, strict=True):
            if isinstance(item, Message) and until is not None:
                item.lease_until = until
        return results

    # -- operators ---------------------------------------------------------------------

    def __repr__(self) -> str:
        return f"<Queue {self.name}>"


async def _first(sent: Awaitable[list[str]]) -> str:
    return (await sent)[0]


def wait_seconds(wait: Duration) -> float:
    """A receive's ``wait``, checked (InvalidArgument past an hour), in seconds."""
    return 0.0 if wait == 0 and type(wait) is int else seconds(wait, "wait", maximum=MAX_WAIT)


def _lease(lease: Duration | None) -> float | None:
    if lease is None:
        return None
    return seconds(lease, "lease", allow_zero=False, maximum=MAX_LEASE)
