"""Rule 25's wait and handler time for consumers that receive and ack over HTTP.

A worker measures both around its handler; a consumer in another language has no
hailq code around its handler, so the serve process measures them itself: the wait
is the time ``/receive`` handed a message out minus the message's available time, the
handler time runs from that hand-out to its ack (ok) or nack (failed). The receipts
handed out are kept in a bounded map, and those whose lease ended are forgotten. The
figures go through the worker's ``FigureRecorder``: counted in memory, written once a
second, the rest written when the app closes.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from hailq.broker import Broker
from hailq.errors import HailqError
from hailq.message import Message
from hailq.observe.recorder import FigureRecorder

MAX_HANDED_OUT = 100_000  # receipts remembered at most; the oldest go first
SWEEP_EVERY = 5.0  # seconds between sweeps of receipts whose lease ended
SAMPLED_FOR = 300.0  # a queue's counters are sampled this long after its last hand-out
SETTINGS_FOR = 30.0  # seconds a queue's service levels are used before they are read again


class HandedOut(NamedTuple):
    queue: str
    priority: int
    waited: float  # seconds from available to handed out
    began: float  # time.monotonic() when handed out
    lease_until: float  # broker clock


class ServeFigures:
    """Wait and handler time of messages received and settled through ``hailq serve``."""

    def __init__(self, broker: Broker, *, interval: float = 1.0,
                 limit: int = MAX_HANDED_OUT) -> None:
        self._broker = broker
        self._limit = limit
        self._lock = threading.Lock()
        self._leases: OrderedDict[str, HandedOut] = OrderedDict()
        self._queues: dict[str, float] = {}  # queue -> monotonic time of its last hand-out
        self._swept = time.monotonic()
        self._settings_read = time.monotonic()
        self._recorder = FigureRecorder(broker, self._sampled, self._slo_of, interval=interval)
        self._started = False
        self._closed = False

    def _slo_of(self, queue: str) -> Mapping[int, float] | None:
        try:
            return self._broker.get_queue(queue).settings.slo
        except HailqError:  # deleted meanwhile: no service level to breach
            return None

    def _sampled(self) -> list[str]:
        """The queues handed out from lately: their counters are sampled, as a worker's."""
        cutoff = time.monotonic() - SAMPLED_FOR
        with self._lock:
            for queue in [q for q, at in self._queues.items() if at < cutoff]:
                del self._queues[queue]
            return sorted(self._queues)

    def _start(self) -> None:
        """The flusher starts with the first hand-out (the app may run without lifespan);
        it reads the broker's clock first, outside the lock."""
        with self._lock:
            if self._started or self._closed:
                return
            self._started = True
        self._recorder.start()

    def handed_out(self, messages: Iterable[Message]) -> None:
        """``/receive`` handed these out now."""
        messages = list(messages)
        if not messages:
            return
        self._start()
        now, began = self._recorder.now(), time.monotonic()
        with self._lock:
            for m in messages:
                if m.receipt is None:
                    continue
                self._leases[m.receipt] = HandedOut(m.queue, m.priority, now - m.available_at,
                                                    began, m.lease_until)
                self._queues[m.queue] = began
            while len(self._leases) > self._limit:
                self._leases.popitem(last=False)
            if began - self._swept >= SWEEP_EVERY:
                self._sweep(now, began)

    def _sweep(self, now: float, began: float) -> None:
        self._swept = began
        for receipt in [r for r, h in self._leases.items() if h.lease_until < now]:
            del self._leases[receipt]
        if began - self._settings_read >= SETTINGS_FOR:  # an operator's new service level
            self._settings_read = began
            self._recorder.forget_settings()

    def extended(self, queue: str, receipt: str, lease_until: float | None) -> None:
        """The lease of ``receipt``, extended on ``queue``, now ends at ``lease_until``
        (None: it held no lease there)."""
        with self._lock:
            found = self._leases.get(receipt)
            if found is None or found.queue != queue:
                return
            if lease_until is not None:
                self._leases[receipt] = found._replace(lease_until=lease_until)
            else:
                del self._leases[receipt]

    def settled(self, queue: str, receipt: str, ok: bool | None) -> None:
        """``receipt``, given back on ``queue``, was acked (``ok``), nacked (not ``ok``),
        or held no lease there (None). A receipt given on another queue than its own
        changed nothing and is kept for its own."""
        with self._lock:
            found = self._leases.get(receipt)
            if found is None or found.queue != queue:
                return
            del self._leases[receipt]
        if ok is None:
            return
        self._recorder.observe(found.queue, found.priority, found.waited,
                               time.monotonic() - found.began, ok)

    def remembered(self) -> int:
        """How many handed-out receipts are remembered now."""
        with self._lock:
            return len(self._leases)

    def close(self) -> None:
        """Write what is left and stop the flusher (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            started = self._started
        if started:
            self._recorder.close()
