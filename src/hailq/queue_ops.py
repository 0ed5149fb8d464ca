"""What operators and readers do with a queue, beside sending and consuming: upkeep,
peeks, dead letters, redrive, purge, pause, settings, lookups, history, cancel, stats and
figures. ``Queue`` (queue.py) is made of these and of its sends and receives."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from hailq._time import Duration, seconds
from hailq.backends.base import (
    AutoscaleListParams,
    CancelledParams,
    CancelOutcome,
    DeadListParams,
    FiguresReadParams,
    MessageRef,
    PeekParams,
    PurgeParams,
    QueueConfigureParams,
    QueuePauseParams,
    QueueRef,
    Receipt,
    RedriveParams,
)
from hailq.checks import check_batch, check_limit
from hailq.codec import check_key, check_plain_text
from hailq.errors import InvalidArgument
from hailq.history import HistoryEntry, HistoryQuery
from hailq.ids import check_message_id
from hailq.models import DeadMessage, MessageDetails, PeekedMessage, QueueStats
from hailq.settings import QueueSettings, check_overrides, parse_overrides

if TYPE_CHECKING:
    from hailq.backends.base import Backend
    from hailq.message import Message
    from hailq.observe.figures import QueueFigures


class QueueOperations:
    """A queue's operations and reads (see ``Queue``)."""

    _backend: Backend
    name: str
    settings: QueueSettings
    overrides: dict[str, Any]

    if TYPE_CHECKING:
        def _receipt(self, item: str | Message) -> Receipt: ...
        def _let_cancelled_go(self, leases: Sequence[Receipt]) -> list[str]: ...

    def maintain(self) -> None:
        """Settle what time alone changed, as consumers do when they receive: due
        messages become ready, ended leases return their message or kill it after its
        last attempt (rule 13). Reads never need this; ``Broker.maintain`` runs it for
        every queue."""
        self._backend.queue_maintain(QueueRef(self.name))

    def peek(self, limit: int = 10) -> list[PeekedMessage]:
        """Look at live messages in delivery order without leasing them (a read)."""
        return self._backend.message_peek(PeekParams(self.name, check_limit(limit)))

    def dead_letters(self, *, error_contains: str | None = None,
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

    def count_dead_letters(self, *, error_contains: str | None = None,
                           older_than: Duration | None = None, ordering_key: str | None = None,
                           limit: int = 10_000) -> int:
        """How many dead letters ``dead_letters`` would list with these filters, counting
        no further than ``limit + 1`` (a result above ``limit`` means "more than
        ``limit``"); a read."""
        from hailq.backends.base import DeadCountParams

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
        return self._backend.message_get(MessageRef(self.name,
                                                          check_message_id(message_id)))

    def history(self, **filters: Any) -> list[HistoryEntry]:
        """This queue's finished messages (rule 40), newest first: acked, dead and
        cancelled ones, kept for the queue's ``retain``. Filters as ``HistoryQuery``:
        ``id``, ``dedup_id``, ``header=(name, value)``, ``ordering_key``, ``outcome``,
        ``since``, ``until``, ``limit``."""
        return self._backend.history_search(HistoryQuery(queue=self.name, **filters))

    def finished(self, message_id: str) -> HistoryEntry | None:
        """The latest history entry of message ``message_id`` of this queue (how and
        when it finished, its attempts); None if history keeps none."""
        found = self.history(id=check_message_id(message_id), limit=1)
        return found[0] if found else None

    def delete_message(self, message_id: str) -> bool:
        """Delete one message whatever its state; False if the queue holds no such
        message. A leased one's consumer then gets LeaseLost on ack; the next message
        of its ordering key becomes receivable (rule 17). Counted as purged."""
        return self._backend.message_delete(MessageRef(self.name,
                                                                check_message_id(message_id)))

    def cancel(self, message_id: str) -> CancelOutcome:
        """Cancel one message by id (rule 40); ``"waiting"`` or ``"running"``, the state
        it was cancelled in.

        A waiting message (ready, delayed, behind its ordering key) is removed at once
        and never starts. A running one's handler is asked to stop within a second (a
        worker raises ``HandlerCancelled`` into it, as a time limit does); its attempt
        records "cancelled", and every later ack, nack or extend of it raises
        ``MessageCancelled``, late or not. It keeps its ``max_in_flight`` slot and its
        ordering key until its handler has stopped or its lease has ended; then the
        key's next message is free, also where the queue parks keys. Counted as purged.
        ``MessageNotFound`` (nothing written) for an unknown, acked or dead message."""
        return self._backend.message_cancel(MessageRef(
            self.name, check_message_id(message_id)))

    def cancelled(self, messages: Sequence[Message]) -> list[str]:
        """The ids among these received messages of this queue that an operator
        cancelled while they ran; a read (a worker's poll, twice a second)."""
        return self._backend.message_cancelled(CancelledParams(
            self.name, [self._receipt(m) for m in messages]))

    def let_cancelled_go(self, messages: Sequence[Message]) -> list[str]:
        """Remove the cancelled messages among these, their handlers having stopped: their
        ``max_in_flight`` slots and ordering keys are freed. Their ids."""
        found = self._let_cancelled_go([self._receipt(m) for m in messages])
        for m in messages:
            if m.id in found:
                m.settled = True
        return found

    def stats(self) -> QueueStats:
        """Counts and totals as the next receive would find them (an ended lease counts as
        ready, or dead after its last attempt); a read: it writes nothing."""
        return self._backend.queue_stats(QueueRef(self.name))

    def figures(self) -> QueueFigures:
        """Stats, rates over the last 1 and 5 minutes, wait and handler time per priority
        with service levels, workers and ``desired_workers`` (rule 25), and the last
        decisions of its autoscalers (rule 24); a read."""
        from hailq.observe.figures import build

        backend = self._backend
        rows = backend.figures_read(FiguresReadParams(self.name))
        return build(rows, self.settings, backend.worker_list(),
                     autoscalers=backend.autoscale_list(AutoscaleListParams(
                         self.name, rows.now - 3600)),
                     decisions=backend.autoscale_list(AutoscaleListParams(
                         self.name, rows.now - 3600, 5)))
