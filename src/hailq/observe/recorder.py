"""Every consumer's figures (SPEC rules 25, 26, 36): one recorder per ``Broker``.

Counted where claims and acks happen (``hailq/queue.py``), whoever consumes: a worker,
a loop of the user's own over ``receive()``/``ack()``, an HTTP client of ``hailq
serve``. A claim counts each message's wait (available -> received), its breach of
the priority's target and whether it is a redelivery; an ack or a nack counts the
handler time (received -> acked or nacked), from the claim time kept with the lease
(in the ``Message``, or in the receipt string for an ack by receipt, from this
process or another). Sends mark their queue, whose counters are then sampled.

A consumer only reads the clock once per claim and per ack and extends a flat list by
a few values per message (no lock, no lookup, and nothing kept that the garbage
collector would track: each message's values go in by value, not as a tuple); a daemon
thread, started at the first count, folds them in batches into buckets per
(queue, priority) (``hailq/observe/tally.py``) and writes them about once a second in
one short transaction (rule 25), and at ``close()`` and at interpreter exit.
A flush that fails is logged and its figures kept for the next one; a process that
dies loses at most the last second's figures. After a fork the child starts empty
(the parent writes what it counted).
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from hailq.backends.base import (
    FiguresRecordParams,
)
from hailq.errors import HailqError
from hailq.observe.flusher import FiguresFlusher
from hailq.observe.tally import Tally, fold, taken
from hailq.observe.tally import params as rows_of
from hailq.outage import covers

if TYPE_CHECKING:
    from hailq.backends.base import Backend, ClaimedRow
    from hailq.broker import Broker
    from hailq.message import Message
    from hailq.queue import Queue

log = logging.getLogger("hailq.figures")

CLOCK_EVERY = 60.0  # seconds between readings of the broker's clock
Slo = Mapping[int, float] | None
Queues = Sequence[str] | Callable[[], Sequence[str]]
_time = time.time


class FigureRecorder:
    """Counts one process's claims, acks and nacks; thread-safe. ``close()`` flushes."""

    def __init__(self, backend: Backend | Broker, queues: Queues = (),
                 slo_of: Callable[[str], Slo] | None = None, *, interval: float = 1.0,
                 clock: Callable[[], float] | None = None) -> None:
        """A broker makes its own (``Broker.figures``); one made apart (tests, tools)
        counts into the same tables. ``queues`` (a list, or a callable giving one) are
        sampled at every flush that writes anything; ``slo_of`` gives the targets
        ``observe`` counts breaches against where it is given none. ``clock``: the
        broker's clock where reading it costs nothing (an injected one); else this
        host's clock corrected by the broker's, read once a minute."""
        from hailq.broker import Broker

        self._backend = backend.backend if isinstance(backend, Broker) else backend
        self._queues = queues
        self._slo_of = slo_of
        self._interval = interval
        self._clock = clock
        self._offset = 0.0  # broker clock - this host's clock
        self._offset_read = -CLOCK_EVERY
        self._reset()
        _LIVE.add(self)

    def _reset(self) -> None:
        """Empty, no flusher (at construction, and in a forked child)."""
        self._flushing = threading.Lock()
        # What consumers counted, for the flusher to fold (``tally.fold``), flat: a fixed
        # number of values per message (``tally.CLAIM`` ...). Each list stays the same
        # object: consumers extend it, the flusher takes the part there when it began
        # (``taken``), so values racing a flush land in this one or the next, whole.
        self._claims: list[Any] = []
        self._acks: list[Any] = []  # of Messages, in time or late, no inbox: the most
        self._settled: list[Any] = []  # every other ack or nack
        self._handled: list[Any] = []  # whole handler times (``ended``)
        self._inboxes: list[Any] = []
        self._slos: dict[str, Slo] = {}  # each queue's targets as last counted
        self._touched: set[str] = set()
        self._unwritten: FiguresRecordParams | None = None  # a failed flush, for the next
        self._flushes = 0
        self._thread: FiguresFlusher | None = None

    # -- counting (any thread) ------------------------------------------------------------

    def now(self) -> float:
        """The broker's clock as this process sees it (waits compare with
        ``available_at``, handler times with the claim time)."""
        if self._clock is not None:
            return self._clock()
        return _time() + self._offset

    def claimed(self, queue: str, slo: Slo, rows: Sequence[ClaimedRow]) -> float:
        """Messages of ``queue`` were just leased: count their waits; return the claim
        time (broker clock) their handler time is measured from."""
        now = _time() + self._offset if self._clock is None else self._clock()
        if self._thread is None:
            self._start()
        claims = self._claims  # tally.CLAIM
        for r in rows:  # ClaimedRow: 5 priority, 7 attempt, 8 enqueued, 12 available
            claims.extend((queue, slo, r[5], now - (r[12] or r[8]), r[7]))
        return now

    def touched(self, queue: str) -> None:
        """``queue`` was sent to or consumed from: sample its counters at the next flush."""
        if self._thread is None:
            self._start()
        self._touched.add(queue)  # atomic; one lost to a flush's swap is sampled next time

    def ended(self, queue: str, slo: Slo, priority: int, handler: float, ok: bool,
              inbox: bool = False) -> None:
        """A message received ``handler`` seconds ago was acked (``ok``) or nacked;
        ``inbox``: its handling used an inbox or an ack transaction (rule 26)."""
        if self._thread is None:
            self._start()
        self._handled.extend((queue, slo, priority, handler, ok, inbox))  # tally.HANDLED

    def settled(self, queue: Queue, items: Sequence[str | Message],
                results: Sequence[object], ok: bool, inbox: bool = False) -> None:
        """``items`` (messages or receipts) were acked (``ok``) or nacked through
        ``queue``: count the handler time of each whose ``result`` is not None, from its
        claim time (kept in the ``Message``, or carried by the receipt, any process's)
        to now, or to when a worker said its handling ended. One clock reading per call
        and four values per message (a plain ack); the flusher reads receipts."""
        now = _time() + self._offset if self._clock is None else self._clock()
        if self._thread is None:
            self._start()
        plain = ok and not inbox  # tally.ACK, folded in C; the rest tally.SETTLED
        if plain and len(items) == 1:  # one message acked: the usual, and the tightest
            item, result = items[0], results[0]
            if result is not None and type(item) is not str \
                    and (began := item.received_at) is not None:  # type: ignore[union-attr]
                self._acks.extend((item._queue, item.priority,  # type: ignore[union-attr]
                                   (item._ended or now) - began, result))  # type: ignore[union-attr]
                return
        acks, settled = self._acks, self._settled  # no zip, no bound method: per call
        for i in range(len(items)):  # as long as ``results``, the backend's answer per item
            result = results[i]
            if result is None:
                continue  # the lease was lost: not this consumer's handling
            item = items[i]
            if type(item) is str:  # a receipt: the flusher reads it
                settled.extend((queue, item, None, now, ok, inbox, result))
                continue
            began = item.received_at  # type: ignore[union-attr]
            if plain and began is not None:
                acks.extend((item._queue, item.priority,  # type: ignore[union-attr]
                             (item._ended or now) - began, result))  # type: ignore[union-attr]
            else:
                settled.extend((item._queue, item.priority, began,  # type: ignore[union-attr]
                                item._ended or now, ok, inbox, result))  # type: ignore[union-attr]

    def observe(self, queue: str, priority: int, wait: float, handler: float, ok: bool,
                inbox: bool = False, *, slo: Slo = None, attempt: int = 1) -> None:
        """One whole handling at once: a claim that waited ``wait`` s and an end after
        ``handler`` s (what ``claimed`` and ``ended`` count; tests and tools)."""
        if slo is None and self._slo_of is not None:
            slo = self._slo_of(queue)
        if self._thread is None:
            self._start()
        self._claims.extend((queue, slo, priority, wait, attempt))
        self.ended(queue, slo, priority, handler, ok, inbox)

    def inbox(self, queue: str, slo: Slo, priority: int) -> None:
        """A handler run on ``queue`` used an inbox or an ack transaction (rule 26)."""
        if self._thread is None:
            self._start()
        self._inboxes.extend((queue, slo, priority))  # tally.INBOX

    def _count(self) -> dict[tuple[str, int], Tally]:
        """Fold what consumers counted into tallies per (queue, priority): the flusher's
        work, off the consumers' path, in batches (``tally.fold``)."""
        tallies = fold(taken(self._claims), taken(self._acks), taken(self._settled),
                       taken(self._handled), taken(self._inboxes), self._slos)
        self._touched.update(q for q, _ in tallies)
        return tallies

    # -- writing ---------------------------------------------------------------------------

    def _start(self) -> None:
        # The clock is read before the lock: on hailq.aio's event loop a read switches
        # greenlets, and another coroutine's send would then block the loop on the lock.
        self._read_clock()
        with self._flushing:
            if self._thread is not None:
                return
            _flush_at_exit()
            # The flusher holds the recorder weakly (hailq/observe/flusher.py).
            thread = FiguresFlusher(self, self._interval)
            weakref.finalize(self, thread.close, 0.0)
            self._thread = thread
            thread.start()

    def flush(self) -> None:
        """Write what was counted since the last flush and sample the touched queues."""
        with self._flushing:
            self._flush()

    def _flush(self) -> None:
        tallies = self._count()
        touched, self._touched = self._touched, set()
        if self._queues and (tallies or touched):  # an idle recorder writes nothing
            touched.update(self._queues() if callable(self._queues) else self._queues)
        params = rows_of(tallies, sorted(touched), self._unwritten)
        self._unwritten = None
        if not (params.rates or params.sampled or params.buckets):
            return
        self._flushes += 1
        try:
            self._backend.figures_record(FiguresRecordParams(
                params.buckets, params.rates, params.sampled, params.sketches,
                params.ranges))
        except HailqError as exc:
            if not covers(exc):  # the outage's lines say it (hailq/outage.py)
                (log.debug if _exiting else log.warning)(
                    "could not write the figures of %s (%s); kept for the next try",
                    ", ".join(params.sampled) or "this process", exc)
            self._unwritten = params

    def close(self) -> None:
        """Stop the flusher and write what is left (``Broker.close`` and the interpreter's
        exit call this); counting again starts a new flusher."""
        with self._flushing:
            thread, self._thread = self._thread, None
        if thread is not None:
            thread.close(self._interval + 5.0)
        try:
            self.flush()
        except Exception:  # the database may be gone already; figures never fail a close
            log.debug("the last figures could not be written", exc_info=True)

    def _read_clock(self) -> None:
        if self._clock is not None:
            return
        try:
            before = time.time()
            broker_now = self._backend.clock_now()
            self._offset = broker_now - (before + time.time()) / 2
            self._offset_read = time.monotonic()
        except HailqError as exc:
            log.debug("could not read the broker's clock (%s)", exc)

    def _tick(self) -> None:
        if time.monotonic() - self._offset_read >= CLOCK_EVERY:
            self._read_clock()
        try:
            self.flush()
        except Exception:  # figures must never take a consumer down
            log.exception("writing the figures failed")


# Every recorder of this process: flushed at exit, emptied in a forked child.
_LIVE: weakref.WeakSet[FigureRecorder] = weakref.WeakSet()


_exiting: list[bool] = []  # the interpreter exits: a last flush that fails is no news


def _flush_all() -> None:
    _exiting.append(True)
    for recorder in list(_LIVE):
        recorder.close()


def _forget_all() -> None:
    for recorder in list(_LIVE):
        recorder._reset()


_at_exit: list[bool] = []


def _flush_at_exit() -> None:
    """Register the flush at exit once, at the first count: after the backend opened its
    connections, so that it runs before they are closed at exit (last in, first out)."""
    if not _at_exit:
        _at_exit.append(True)
        atexit.register(_flush_all)


os.register_at_fork(after_in_child=_forget_all)
