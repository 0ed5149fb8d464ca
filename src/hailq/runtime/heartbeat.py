"""The lease keeper: extends the lease of every message whose handler is still running.

Each lease is renewed to its full length once a third of it has passed
(``fraction``), so a handler may run far longer than the lease without the
message being redelivered, while a crashed worker's leases still end within
one lease length (SPEC rules 8 and 23). The length is the queue's as stored
now (rule 39): a renewal reads it where it is applied, and the next one is
timed by the queue's settings as the worker last read them (``retime`` when
they change, within a second: ``runtime/settings_watch.py``).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from hailq.errors import HailqError
from hailq.outage import covers
from hailq.queue import Message
from hailq.runtime.logs import about
from hailq.runtime.service import Service

log = logging.getLogger("hailq.worker")

# The thread looks at least this often (seconds), so a hold whose renewal is due later
# does not wake it: an idle worker's next message reaches its handler with no extra
# thread woken on the way (a wake here competed with the handler's own start).
_LOOK_EVERY = 1.0


@dataclass
class _Held:
    message: Message
    due: float

    @property
    def lease(self) -> float:
        """The queue's lease as this process last read it (kept fresh by the worker)."""
        return self.message.source.settings.lease


class LeaseKeeper(Service):
    """Keeps leases alive until ``release``; thread-safe. ``start()`` then ``close()``."""

    name = "hailq-leases"

    def __init__(self, *, fraction: float = 1 / 3,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        super().__init__(_LOOK_EVERY)
        self._fraction = fraction
        self._now = monotonic
        self._held: dict[str, _Held] = {}
        # When the thread wakes next (it looks at every lease then): a hold due later
        # need not wake it, and no hold has to look at the others.
        self._wakes_at = -math.inf

    def hold(self, message: Message) -> None:
        """Start renewing ``message``'s lease (its queue's lease, as stored now)."""
        due = self._now() + message.source.settings.lease * self._fraction
        with self.lock:
            self._held[message.receipt] = _Held(message, due)
            if due < self._wakes_at:
                self.wake()  # otherwise the thread already wakes early enough

    def retime(self, queue: str) -> None:
        """The queue's lease changed: renew its leases now, each to the new length, and
        time the next renewals by it."""
        now = self._now()
        with self.lock:
            for held in self._held.values():
                if held.message.queue == queue:
                    held.due = min(held.due, now)
        self.wake()

    def release(self, message: Message) -> None:
        """Stop renewing ``message``'s lease (it is settled or given back)."""
        with self.lock:
            self._held.pop(message.receipt, None)

    def close(self, deadline: float = 5.0) -> None:
        with self.lock:
            self._held.clear()
        super().close(deadline)

    def tick(self) -> float | None:
        """Renew the leases due; the seconds until the next is (at most ``_LOOK_EVERY``)."""
        with self.lock:
            now = self._now()
            due = [h for h in self._held.values() if h.due <= now]
        by_queue: dict[str, list[_Held]] = {}
        for held in due:
            by_queue.setdefault(held.message.queue, []).append(held)
        for group in by_queue.values():
            self._renew(group)
        with self.lock:
            now = self._now()
            soonest = min((h.due for h in self._held.values()), default=math.inf)
            self._wakes_at = min(soonest, now + _LOOK_EVERY)
            return max(self._wakes_at - now, 0.001)

    def _renew(self, group: list[_Held]) -> None:
        """Renew one queue's due leases in one transaction (one lease length each, the
        queue's as stored now)."""
        queue = group[0].message.source
        try:
            results = queue.extend_many([h.message for h in group])
        except HailqError as exc:
            quiet = covers(exc)  # the outage's lines say it (hailq/outage.py)
            for held in group:
                if not quiet:
                    log.warning("message %s of queue %s: could not extend its lease (%s); "
                                "retrying", held.message.id, held.message.queue, exc,
                                extra=about(held.message))
                held.due = self._now() + min(1.0, held.lease * self._fraction / 3)
            return
        for held, until in zip(group, results, strict=True):
            if until is None:
                with self.lock:
                    released = held.message.receipt not in self._held
                if released:
                    continue  # settled meanwhile (a time limit's nack): nothing was lost
                log.warning("message %s of queue %s: lease lost while its handler runs; it "
                            "may be processed twice", held.message.id, held.message.queue,
                            extra=about(held.message))
                self.release(held.message)
            else:
                held.due = self._now() + held.lease * self._fraction
