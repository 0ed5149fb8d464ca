"""Queues: the public API over the storage seam (SPEC rules 1-18)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from hailq._time import Duration, seconds
from hailq.backends.base import (
    AckParams,
    ClaimParams,
    DeadListParams,
    ExtendParams,
    MessageDeleteParams,
    MessageGetParams,
    NackOutcome,
    NackParams,
    NewMessage,
    PeekParams,
    PurgeParams,
    QueueConfigureParams,
    QueuePauseParams,
    Receipt,
    RedriveParams,
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
    check_limit,
    check_max_messages,
    error_text,
)
from hailq.codec import Body, check_key, check_plain_text
from hailq.errors import InvalidArgument, LeaseLost
from hailq.hooks import Hook, sending
from hailq.ids import check_message_id, parse_receipt
from hailq.message import Message
from hailq.models import DeadMessage, MessageDetails, PeekedMessage, QueueStats
from hailq.observe import inbox_use
from hailq.policy.retry import backoff
from hailq.settings import QueueSettings, check_overrides, parse_overrides

if TYPE_CHECKING:
    from hailq.backends.base import Backend, ClaimedRow
    from hailq.observe.figures import QueueFigures
    from hailq.observe.recorder import FigureRecorder

__all__ = ["MAX_BATCH", "Envelope", "Message", "Queue", "build_message", "check_batch"]


class Queue:
    """A named, durable queue. Get one with ``broker.queue(name, **settings)``.

    ``settings`` are the effective settings (declared, with an operator's
    ``overrides`` laid over them) as this process last read them; what consumers
    obey (lease, attempts, cap, aging, dead-letter policy, a pause) is read from
    the database where each statement runs, so an operator's change reaches
    running workers within a second.
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
        envelope = Envelope(body, priority, ordering_key, delay, headers, dedup_id, not_before)
        if self._hooks:
            return self._send_hooked([envelope], connection)[0]
        sent = self._backend.message_send(SendParams([self._new(envelope)], connection))[0]
        if self.recorder is not None:
            self.recorder.touched(self.name)  # its counters are sampled (rates, rule 36)
        return sent

    def send_many(self, items: Iterable[Body | Envelope], *, connection: Any = None,
                  ) -> list[str]:
        """Enqueue a batch atomically, all or none; items are bodies or ``Envelope``s."""
        envelopes = [i if isinstance(i, Envelope) else Envelope(i)
                     for i in check_batch(items, "send_many")]
        if not envelopes:
            return []
        if self._hooks:
            return self._send_hooked(envelopes, connection)
        sent = self._backend.message_send(SendParams([self._new(e) for e in envelopes],
                                                     connection))
        if self.recorder is not None:
            self.recorder.touched(self.name)
        return sent

    def _send_hooked(self, envelopes: list[Envelope], connection: Any) -> list[str]:
        """A send with the broker's send hooks around it (hailq/hooks.py)."""
        with sending(self._hooks, self.name, "send") as call:
            messages = [self._new(replace(e, headers=call.headers(e.headers)))
                        for e in envelopes]
            sent = self._backend.message_send(SendParams(messages, connection))
            if self.recorder is not None:
                self.recorder.touched(self.name)
            call.done(sent)
        return sent

    def _new(self, e: Envelope) -> NewMessage:
        return build_message(self.name, self.settings, e, self._backend.clock_now)

    # -- receiving ---------------------------------------------------------------------

    def receive(self, max_messages: int = 1, lease: Duration | None = None,
                wait: Duration = 0) -> list[Message]:
        """Lease up to ``max_messages`` (rule 6). ``wait`` > 0 long-polls up to that long.
        Without ``lease`` the queue's stored lease applies."""
        wait_s = 0.0 if wait == 0 and type(wait) is int else seconds(wait, "wait",
                                                                      maximum=MAX_WAIT)
        params = ClaimParams(self.name, check_max_messages(max_messages),
                             None if lease is None else _lease(lease))
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
                        lease: Duration | None = None,
                        ) -> tuple[list[bool | None], list[Message]]:
        """Ack ``acks`` (messages of any queues of this broker) and lease up to
        ``max_messages`` of this queue, in one transaction where the backend allows:
        finished work is never still leased when new work arrives. Returns the acks'
        results (as ``ack_many``) and the received messages (as ``receive``, no wait)."""
        finished = list(acks)
        result = self._backend.message_claim(ClaimParams(
            self.name, check_max_messages(max_messages), _lease(lease),
            [m.lease for m in finished]))
        for message, acked in zip(finished, result.acked, strict=True):
            if acked is not None:
                message.settled = True
        if finished and self.recorder is not None:
            self._ended(finished, result.acked, ok=True)
        return result.acked, self._messages(result.rows)

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
        return results

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
        with self._backend.message_ack_transaction(lease) as conn:
            yield conn
        self._ended([receipt], [False], ok=True, inbox=not in_run)  # acked, not late

    def nack(self, receipt: str | Message, delay: Duration | None = None,
             error: str | None = None, *, attempt: int | None = None) -> None:
        """Give a leased message back (rule 10); after ``max_attempts`` it goes dead.

        Without ``delay`` the wait is the retry backoff of the message's attempt
        (``attempt`` when the caller knows it, as ``Message.nack`` does)."""
        lease = self._receipt(receipt)
        text = error_text(error)
        if delay is not None:
            self._nack(receipt, lease, "retry", text, delay=seconds(delay, "delay"))
        elif attempt is not None:
            self._nack(receipt, lease, "retry", text,
                       delay=backoff(self.settings.retry, attempt))
        else:  # the statement picks the wait for the attempt it finds: no round trip
            table = tuple(backoff(self.settings.retry, n)
                          for n in range(1, self.settings.max_attempts + 1))
            self._nack(receipt, lease, "retry", text, backoff_table=table)

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
              error: str | None, *, delay: float | None = None,
              backoff_table: tuple[float, ...] = (0.0,)) -> None:
        if not self._backend.message_nack(NackParams(lease, error or "nacked", outcome,
                                                     delay, backoff_table)):
            raise LeaseLost(f"message {lease.message_id}: the receipt no longer holds its "
                            "lease; nothing changed")
        if outcome != "give_back":  # given back untried: no handler ran (rule 36)
            self._ended([item], [True], ok=False)

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
        span = seconds(seconds_, "extend seconds", allow_zero=False, maximum=MAX_LEASE)
        items = check_batch(receipts, "extend_many")
        leases = [self._receipt(i) for i in items]
        results = self._backend.message_extend(ExtendParams(leases, span)) if leases else []
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
        self._backend.queue_maintain(self.name)

    def peek(self, limit: int = 10) -> list[PeekedMessage]:
        """Look at live messages in delivery order without leasing them (a read)."""
        return self._backend.message_peek(PeekParams(self.name, check_limit(limit)))

    def dead_letters(self, error_contains: str | None = None,
                     older_than: Duration | None = None, ordering_key: str | None = None,
                     limit: int = 1000) -> list[DeadMessage]:
        """Dead messages, oldest death first, each with the error of every attempt; a
        message whose last lease ended is among them before any upkeep (a read)."""
        if error_contains is not None:
            if not isinstance(error_contains, str):
                raise InvalidArgument("error_contains must be a string")
            check_plain_text(error_contains, "error_contains")
        params = DeadListParams(
            self.name, error_contains,
            None if older_than is None else seconds(older_than, "older_than"),
            check_key(ordering_key, "ordering_key"), check_limit(limit))
        return self._backend.dead_list(params)

    def count_dead_letters(self, error_contains: str | None = None,
                           older_than: Duration | None = None, limit: int = 10_000, *,
                           ordering_key: str | None = None) -> int:
        """How many dead letters ``dead_letters`` would list with these filters, counting
        no further than ``limit + 1`` (a result above ``limit`` means "more than
        ``limit``"); a read."""
        from hailq.backends.overview import DeadCountParams

        if error_contains is not None:
            if not isinstance(error_contains, str):
                raise InvalidArgument("error_contains must be a string")
            check_plain_text(error_contains, "error_contains")
        return self._backend.dead_count(DeadCountParams(
            self.name, error_contains,
            None if older_than is None else seconds(older_than, "older_than"),
            check_limit(limit), check_key(ordering_key, "ordering_key")))

    def redrive(self, ids: Iterable[str] | None = None) -> int:
        """Return dead messages (all, or these ids) to ready with attempt 0, in key order."""
        chosen = None if ids is None else [check_message_id(i) for i in check_batch(ids, "redrive")]
        return self._backend.dead_redrive(RedriveParams(self.name, chosen))

    def purge(self, dead: bool = False) -> int:
        """Delete every live message (ready, delayed, blocked and leased ones), or with
        ``dead=True`` the dead letters instead; return how many were deleted."""
        if not isinstance(dead, bool):
            raise InvalidArgument("dead must be True or False")
        return self._backend.message_purge(PurgeParams(self.name, dead))

    def pause(self) -> None:
        """Stop delivering: receivers and workers get nothing from this queue until
        ``resume`` (running ones within a second); sends are still accepted, and
        ``stats().paused`` says so. Kept apart from what code declares: a worker that
        starts and declares the queue does not undo it."""
        self._backend.queue_pause(QueuePauseParams(self.name, True))

    def resume(self) -> None:
        """Deliver again after ``pause``; waiting receivers wake."""
        self._backend.queue_pause(QueuePauseParams(self.name, False))

    def configure(self, *, reset: bool = False, **settings: Any) -> QueueSettings:
        """An operator's change: override ``settings`` (the names and values of
        ``broker.queue``) apart from what code declares, so the next deploy's
        declaration does not undo it; ``reset=True`` first clears every override.
        Returns the effective settings: declared, with each overridden setting
        replaced whole. Running consumers obey lease, attempts, cap, aging and
        dead-letter policy within a second; bad names or values raise InvalidArgument
        and change nothing."""
        if not isinstance(reset, bool):
            raise InvalidArgument("reset must be True or False")
        if "rate" in settings and settings["rate"] is None:
            settings.setdefault("burst", None)  # no rate, no burst: the limit goes whole
        changes = check_overrides(settings)
        record = self._backend.queue_configure(QueueConfigureParams(
            self.name, json.dumps(changes, sort_keys=True), reset))
        self.overrides = parse_overrides(record.overrides)
        self.settings = QueueSettings.from_json(record.declared).overlay(self.overrides)
        return self.settings

    def get_message(self, message_id: str) -> MessageDetails | None:
        """One message of this queue by id, as the next receive would find it: its
        state, attempts, body, headers and the error of each attempt; None if the
        queue holds no such message (acked, purged, or never sent). A read."""
        return self._backend.message_get(MessageGetParams(self.name,
                                                          check_message_id(message_id)))

    def delete_message(self, message_id: str) -> bool:
        """Delete one message whatever its state; False if the queue holds no such
        message. A leased one's consumer then gets LeaseLost on ack; the next message
        of its ordering key becomes receivable (rule 17). Counted as purged."""
        return self._backend.message_delete(MessageDeleteParams(self.name,
                                                                check_message_id(message_id)))

    def stats(self) -> QueueStats:
        """Counts and totals as the next receive would find them (an ended lease counts as
        ready, or dead after its last attempt); a read: it writes nothing."""
        return self._backend.queue_stats(self.name)

    def figures(self) -> QueueFigures:
        """Stats, rates over the last 1 and 5 minutes, wait and handler time per priority
        with service levels, workers and ``desired_workers`` (rule 25), and the last
        decisions of its autoscalers (rule 24); a read."""
        from hailq.observe.figures import build

        rows = self._backend.figures_read(self.name)
        return build(rows, self.settings, self._backend.worker_list(),
                     autoscalers=self._backend.autoscale_list(self.name, rows.now - 3600),
                     decisions=self._backend.autoscale_list(self.name, rows.now - 3600, 5))

    def __repr__(self) -> str:
        return f"<Queue {self.name}>"


def _lease(lease: Duration | None) -> float | None:
    if lease is None:
        return None
    return seconds(lease, "lease", allow_zero=False, maximum=MAX_LEASE)
