"""The worker's figure recorder: wait and handler time per (queue, priority, bucket),
counted in memory and written to the broker's database once a second in one short
transaction (rule 25). A message costs a lock and a few dictionary updates; nothing
is written per message. A flush that fails is logged and its figures kept for the
next one; a process that dies loses at most the last second's figures.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from hailq.backends.base import BucketAdd, FiguresRecordParams, RateAdd
from hailq.broker import Broker
from hailq.errors import HailqError
from hailq.observe.histogram import bounds_for, bucket_of

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
        self._buckets: dict[tuple[str, str, int, float], list[float]] = {}
        self._rates: dict[tuple[str, int], list[float]] = {}
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
        wait = max(wait, 0.0)
        if self._process is not None:
            self._process.observe(queue, handler, ok)
        bounds, slo = self._bounds_of(queue)
        target = slo.get(priority)
        wait_le, handler_le = bucket_of(bounds, wait), bucket_of(bounds, handler)
        with self._lock:
            for kind, le, value in (("wait", wait_le, wait), ("handler", handler_le, handler)):
                cell = self._buckets.setdefault((queue, kind, priority, le), [0, 0.0])
                cell[0] += 1
                cell[1] += value
            if inbox:  # counted as a bucket of its own kind: no schema change
                self._buckets.setdefault((queue, "inbox", priority, 0.0), [0, 0.0])[0] += 1
            rate = self._rates.setdefault((queue, priority), [0, 0, 0, 0, 0.0])
            rate[0] += 1
            rate[1 if ok else 2] += 1
            if target is not None and wait > target:
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
        with self._lock:
            buckets, self._buckets = self._buckets, {}
            rates, self._rates = self._rates, {}
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
            log.warning("could not write the figures of %s (%s); kept for the next try",
                        ", ".join(sampled) or "this process", exc)
            with self._lock:  # back in, to go with the next flush
                for key, (n, t) in buckets.items():
                    cell = self._buckets.setdefault(key, [0, 0.0])
                    cell[0] += n
                    cell[1] += t
                for rkey, values in rates.items():
                    row = self._rates.setdefault(rkey, [0, 0, 0, 0, 0.0])
                    for i, v in enumerate(values):
                        row[i] += v

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
