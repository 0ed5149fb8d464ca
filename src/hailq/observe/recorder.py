"""The worker's figure recorder: wait and handler time per (queue, priority, bucket),
counted in memory and written to the broker's database once a second in one short
transaction (rule 25). A message costs a lock, two bisections and a few list updates
in its (queue, priority)'s tally; nothing is written per message. A flush that fails
is logged and its figures kept for the next one; a process that dies loses at most
the last second's figures.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from hailq.backends.base import BucketAdd, FiguresRecordParams, RateAdd
from hailq.backends.outage import covers
from hailq.broker import Broker
from hailq.errors import HailqError
from hailq.observe.histogram import bounds_for, bucket_index

if TYPE_CHECKING:
    from hailq.observe.process import ProcessSeries

log = logging.getLogger("hailq.worker")

PRUNE_EVERY = 60  # flushes between prunes of slots older than an hour
CLOCK_EVERY = 60.0  # seconds between readings of the broker's clock

SloOf = Callable[[str], Mapping[int, float] | None]
Queues = Sequence[str] | Callable[[], Sequence[str]]


class FigureRecorder:
    """Counts what a worker's handlers did; ``start()`` the flusher, ``close()`` flushes."""

    def __init__(self, broker: Broker, queues: Queues, slo_of: SloOf, *,
                 interval: float = 1.0, process: ProcessSeries | None = None) -> None:
        """``queues`` get their counters sampled at each flush: a list, or a callable
        giving the list (a process whose queues change, such as ``hailq serve``)."""
        self._broker = broker
        self._process = process  # this process's own series (--metrics-port), if served
        self._queues = queues if callable(queues) else list(queues)
        self._slo_of = slo_of
        self._interval = interval
        self._lock = threading.Lock()
        self._tallies: dict[tuple[str, int], _Tally] = {}
        # What a failed flush could not write, added to the next one (the flusher's own).
        self._unwritten: tuple[_Buckets, _Rates] = ({}, {})
        self._flushing = threading.Lock()
        self._bounds: dict[str, tuple[tuple[float, ...], Mapping[int, float]]] = {}
        self._offset = 0.0  # broker clock - this host's clock
        self._offset_read = -CLOCK_EVERY
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="hailq-figures", daemon=True)
        self._flushes = 0

    def start(self) -> None:
        self._read_clock()
        self._thread.start()

    def now(self) -> float:
        """The broker's clock as this host sees it: waits compare with ``available_at``."""
        return time.time() + self._offset

    def observe(self, queue: str, priority: int, wait: float, handler: float,
                ok: bool, inbox: bool = False) -> None:
        """One handler run: its message waited ``wait`` s and ran ``handler`` s; ``inbox``:
        the handler used an inbox or an ack transaction (``hailq doctor``, rule 26)."""
        if wait < 0.0:
            wait = 0.0
        if self._process is not None:
            self._process.observe(queue, handler, ok)
        bounds, slo = self._bounds_of(queue)  # outside the lock: a first look reads settings
        with self._lock:
            tally = self._tallies.get((queue, priority))
            if tally is None:  # the first run of this (queue, priority) since the last flush
                tally = self._tallies[queue, priority] = _Tally(bounds, slo.get(priority))
            i = bucket_index(tally.bounds, wait)
            tally.waits[i] += 1
            tally.wait_sums[i] += wait
            i = bucket_index(tally.bounds, handler)
            tally.handlers[i] += 1
            tally.handler_sums[i] += handler
            tally.inbox += inbox
            rate = tally.rate
            rate[0] += 1
            rate[1 if ok else 2] += 1
            if tally.target is not None and wait > tally.target:
                rate[3] += 1
            rate[4] += handler

    def _bounds_of(self, queue: str) -> tuple[tuple[float, ...], Mapping[int, float]]:
        found = self._bounds.get(queue)
        if found is None:
            slo = dict(self._slo_of(queue) or {})
            found = self._bounds[queue] = (bounds_for(slo), slo)
        return found

    def forget_settings(self) -> None:
        """Read each queue's service levels again at its next message."""
        self._bounds = {}

    def flush(self) -> None:
        """Write what was counted since the last flush (and sample the queues' counters)."""
        with self._flushing:
            self._flush()

    def _flush(self) -> None:
        with self._lock:
            tallies, self._tallies = self._tallies, {}
        buckets, rates = self._unwritten
        self._unwritten = ({}, {})
        for (queue, priority), tally in tallies.items():
            tally.add_to(queue, priority, buckets, rates)
        self._flushes += 1
        sampled = list(self._queues() if callable(self._queues) else self._queues)
        if not (buckets or rates or sampled):
            return  # nothing to write (a serve process nobody receives from)
        params = FiguresRecordParams(
            buckets=[BucketAdd(q, k, p, le, int(n), t)  # type: ignore[arg-type]
                     for (q, k, p, le), (n, t) in buckets.items()],
            rates=[RateAdd(q, p, int(s), int(a), int(f), int(b), h)
                   for (q, p), (s, a, f, b, h) in rates.items()],
            sampled=sampled, prune=self._flushes % PRUNE_EVERY == 1)
        try:
            self._broker.backend.figures_record(params)
        except HailqError as exc:
            if not covers(exc):  # the outage's lines say it (backends/outage.py)
                log.warning("could not write the figures of %s (%s); kept for the next try",
                            ", ".join(sampled) or "this process", exc)
            self._unwritten = (buckets, rates)  # to go with the next flush

    def close(self) -> None:
        """Stop the flusher and write what is left."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(self._interval + 5.0)
        self.flush()

    def _read_clock(self) -> None:
        try:
            before = time.time()
            broker_now = self._broker.now()
            self._offset = broker_now - (before + time.time()) / 2
            self._offset_read = time.monotonic()
        except HailqError as exc:
            log.debug("could not read the broker's clock (%s)", exc)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            if time.monotonic() - self._offset_read >= CLOCK_EVERY:
                self._read_clock()
            try:
                self.flush()
            except Exception:  # figures must never take a worker down
                log.exception("writing the figures failed")


_Buckets = dict[tuple[str, str, int, float], list[float]]  # (queue, kind, priority, le)
_Rates = dict[tuple[str, int], list[float]]  # (queue, priority): started ... handler total


class _Tally:
    """What the handlers of one (queue, priority) did since the last flush: counts and
    sums per bucket index of ``bounds``, and the rates' five figures."""

    __slots__ = ("bounds", "handler_sums", "handlers", "inbox", "rate", "target", "wait_sums",
                 "waits")

    def __init__(self, bounds: tuple[float, ...], target: float | None) -> None:
        self.bounds, self.target = bounds, target
        self.waits, self.wait_sums = [0] * len(bounds), [0.0] * len(bounds)
        self.handlers, self.handler_sums = [0] * len(bounds), [0.0] * len(bounds)
        self.inbox = 0
        self.rate: list[float] = [0, 0, 0, 0, 0.0]  # started, acked, failed, breaches, s

    def add_to(self, queue: str, priority: int, buckets: _Buckets, rates: _Rates) -> None:
        """Add these counts to a flush's rows (only buckets that saw something)."""
        for kind, counts, sums in (("wait", self.waits, self.wait_sums),
                                   ("handler", self.handlers, self.handler_sums)):
            for le, n, total in zip(self.bounds, counts, sums, strict=True):
                if n:
                    cell = buckets.setdefault((queue, kind, priority, le), [0, 0.0])
                    cell[0] += n
                    cell[1] += total
        if self.inbox:  # counted as a bucket of its own kind: no schema change
            buckets.setdefault((queue, "inbox", priority, 0.0), [0, 0.0])[0] += self.inbox
        row = rates.setdefault((queue, priority), [0, 0, 0, 0, 0.0])
        for i, value in enumerate(self.rate):
            row[i] += value
