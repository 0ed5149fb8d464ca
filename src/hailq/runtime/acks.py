"""The ack batcher: acks of concurrent handlers committed together, a few at a time.

Handlers hand finished messages to one flusher thread, which acks everything
pending in one transaction per queue every ``interval`` seconds, or sooner
when ``batch`` are waiting. An ack lost in a crash only causes a redelivery,
which at-least-once delivery allows; ``close()`` flushes what is pending.

The fetch loop takes the pending acks with ``handover()`` and commits them
with its next claim, in one transaction, so a finished message is never still
leased while its slot takes new work (a message that then kills the process
must not take its finished neighbour to the dead letters with it).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

from hailq.errors import HailqError, StorageError
from hailq.outage import covers
from hailq.queue import Message, Queue
from hailq.runtime.logs import about
from hailq.runtime.service import Service

log = logging.getLogger("hailq.worker")


class AckBatcher(Service):
    """Coalesces acks; thread-safe. ``start()`` the flusher, ``close()`` to flush and stop."""

    name = "hailq-acks"
    IDLE = 3600.0  # seconds the flusher sleeps with nothing pending (a submit wakes it)

    def __init__(self, queues: Mapping[str, Queue], *, interval: float = 0.005,
                 batch: int = 100) -> None:
        super().__init__(self.IDLE)
        self._queues = queues
        self._interval = interval
        self._batch = batch
        self._pending: list[Message] = []
        self._committing = threading.Lock()  # held while a batch is being acked
        self.acked = 0
        self.late = 0
        self.lost = 0
        # Ids of messages whose ack a database failure held back: its reply may have been
        # lost after it committed, or the lease ended meanwhile and the message is delivered
        # again; either is the failure's consequence (its own lines say it), not news.
        self._unsure: set[str] = set()

    def submit(self, message: Message) -> None:
        """Ack ``message`` soon. After ``close()`` it is acked at once, in the caller's thread."""
        with self.lock:
            if not self.closing:
                self._pending.append(message)
                # Wake the flusher for the first of a batch and for a full one only: woken
                # by every ack it would commit them one by one, beside the fetch loop that
                # sends them with its next claim anyway.
                if len(self._pending) == 1 or len(self._pending) >= self._batch:
                    self.wake()
                return
        self._ack([message])

    @contextmanager
    def handover(self) -> Iterator[list[Message]]:
        """Take every pending ack, to be committed by the caller (with its next claim);
        the caller reports the outcome with ``record``. Waits for a batch being committed,
        and keeps the flusher out until the block ends."""
        with self._committing:
            with self.lock:
                taken, self._pending = self._pending, []
            try:
                yield taken
            except BaseException as exc:
                with self.lock:  # not known to be committed: they go out with the next batch
                    self._pending[:0] = taken
                    self.unsure(taken, exc)
                raise

    def tick(self) -> float | None:
        with self.lock:
            # Give concurrent handlers a moment to join this transaction (or the fetch
            # loop to take them all with its next claim).
            deadline = time.monotonic() + self._interval
            while not self.closing and 0 < len(self._pending) < self._batch:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self.lock.wait(remaining)
        self._flush()
        return None

    def closed(self) -> None:
        """Flush every pending ack (the flusher has stopped)."""
        self._flush()

    def _flush(self) -> None:
        with self._committing:
            with self.lock:
                taken, self._pending = self._pending, []
            if taken:
                self._ack_now(taken)

    def _ack(self, messages: list[Message]) -> None:
        with self._committing:
            self._ack_now(messages)

    def _ack_now(self, messages: list[Message]) -> None:
        by_queue: dict[str, list[Message]] = {}
        for message in messages:
            by_queue.setdefault(message.queue, []).append(message)
        for name, group in by_queue.items():
            self._ack_group(self._queues[name], group)

    def _ack_group(self, queue: Queue, group: list[Message]) -> None:
        for attempt in range(3):
            try:
                results = queue.ack_many(group)
                break
            except HailqError as exc:
                self.unsure(group, exc)
                if attempt == 2:
                    self._unsure.difference_update(message.id for message in group)
                    if covers(exc):  # the outage's lines say it (hailq/outage.py)
                        return
                    log.error("could not ack %d message(s) of queue %s (%s); they will be "
                              "redelivered when their leases end", len(group), queue.name, exc)
                    return
                time.sleep(0.1 * 2 ** attempt)
        self.record(group, results)

    def unsure(self, group: Sequence[Message], exc: BaseException) -> None:
        """Note that a database failure (``exc``) held back these messages' ack."""
        if isinstance(exc, StorageError):
            self._unsure.update(message.id for message in group)

    def record(self, group: Sequence[Message], results: Sequence[bool | None]) -> None:
        """Count (and log) the outcome of acks committed for these messages."""
        for message, result in zip(group, results, strict=True):
            queue = message.source
            if result is None and message.id in self._unsure:
                self.lost += 1
                log.info("message %s of queue %s: its ack, held back by a database failure, "
                         "found the lease gone (an earlier try committed, or the lease ended "
                         "and it is delivered again)", message.id, queue.name,
                         extra=about(message))
            elif result is None:
                self.lost += 1
                log.warning("message %s of queue %s: ack found its lease gone (received "
                            "again, cancelled, or settled by the handler itself)", message.id,
                            queue.name, extra=about(message))
            elif result:
                self.late += 1
                log.warning("message %s of queue %s: late ack (the lease had ended)",
                            message.id, queue.name, extra=about(message))
            else:
                self.acked += 1
            self._unsure.discard(message.id)
