"""A received message and the lease it holds (SPEC rules 6-10, 22)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from hailq._time import Duration
from hailq.backends.base import ClaimedRow, Receipt
from hailq.codec import Body, decode_body, decode_headers
from hailq.ids import make_receipt, parse_receipt, receipt_claim

if TYPE_CHECKING:
    from hailq.queue import Queue


class Message:
    """A received message and its lease. ``receipt`` names this lease alone."""

    __slots__ = ("_ended", "_lease", "_queue", "_receipt", "attempt", "available_at", "body",
                 "enqueued_at", "fencing_token", "headers", "id", "lease_until",
                 "ordering_key", "priority", "received_at", "settled")
    _ended: float | None  # when a worker's handler ended, if it says so
    _receipt: str | None  # written when first asked for: acks of a Message do not need it

    def __init__(self, queue: Queue, *, id: str, body: Body, headers: dict[str, str],
                 priority: int, ordering_key: str | None, attempt: int, enqueued_at: float,
                 lease_until: float, receipt: str, seq: int | None = None,
                 available_at: float | None = None, received_at: float | None = None,
                 fencing_token: int = 0) -> None:
        _, token, named_seq = parse_receipt(receipt)
        claim = receipt_claim(receipt)
        self._fill(queue, Receipt(queue.name, id, token, named_seq if seq is None else seq),
                   body, headers, priority, ordering_key, attempt, enqueued_at, lease_until,
                   fencing_token, enqueued_at if available_at is None else available_at,
                   received_at if received_at is not None or claim is None else claim[1])
        self._receipt = receipt

    @classmethod
    def claimed(cls, queue: Queue, r: ClaimedRow, received_at: float | None = None,
                ) -> Message:
        """From a claimed row, without ``__init__``'s keywords: receive builds one per
        message, and at batch sizes of 10 and more this is a visible share of a cycle."""
        m = cls.__new__(cls)
        m._fill(queue, tuple.__new__(Receipt, (queue.name, r.id, r.token, r.seq)),  # no frame
                decode_body(r.body, r.body_kind), decode_headers(r.headers), r.priority,
                r.ordering_key, r.attempt, r.enqueued_at, r.lease_until, r.fencing_token,
                r.available_at or r.enqueued_at, received_at)
        return m

    def _fill(self, queue: Queue, lease: Receipt, body: Body, headers: dict[str, str],
              priority: int, ordering_key: str | None, attempt: int, enqueued_at: float,
              lease_until: float, fencing_token: int, available_at: float,
              received_at: float | None) -> None:
        """Every field, set in this one place (``__init__`` and ``claimed``)."""
        self._queue, self._lease, self.id = queue, lease, lease.message_id
        self.body, self.headers, self.priority = body, headers, priority
        self.ordering_key, self.attempt = ordering_key, attempt
        self.enqueued_at, self.lease_until = enqueued_at, lease_until
        # When it became receivable this time (broker's clock): its wait ends at receive.
        self.available_at = available_at
        # Rule 41: grows with every lease of the database, so with every lease of this
        # message and of its ordering key; a downstream that remembers the highest it saw
        # refuses a write carrying a lower one (docs/concepts/leases.md). 0: not known.
        self.fencing_token = fencing_token
        # When this lease began (broker clock as this process reads it): the handler time
        # counted at ack or nack runs from here (rule 36); None where unknown.
        self.received_at = received_at
        self._ended = self._receipt = None
        self.settled = False  # acked, nacked or dead-lettered through this object

    def handled(self) -> None:
        """Say the handling of this message ended now, though its ack follows later (a
        worker's batched ack): the handler time then runs to here (rule 36)."""
        figures = self._queue.recorder
        self._ended = figures.now() if figures is not None else None

    @property
    def lease(self) -> Receipt:
        """The lease this message holds, as the storage seam names it."""
        return self._lease

    @property
    def receipt(self) -> str:
        """The receipt of this lease, a plain string: ``queue.ack(receipt)`` works later."""
        if self._receipt is None:
            lease = self._lease
            self._receipt = make_receipt(lease.message_id, lease.token, lease.seq,
                                         self.priority, self.received_at)
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
        self._queue.nack(self, delay=delay, error=error)
        self.settled = True

    def give_back(self, reason: str | None = None) -> None:
        """Return the message now, untried: a consumer that stops before its work is done
        (a worker's shutdown) gives it back. Unlike ``nack`` this is no failure: the
        message keeps its place in line and never dies of it, even on its last attempt
        (the attempt still counts, so the next delivery may show one more than
        ``max_attempts``). Raises LeaseLost as ``nack`` does."""
        self._queue.give_back(self, reason)
        self.settled = True

    def dead_letter(self, reason: str) -> None:
        """Move the message to the dead-letter queue now, whatever attempts it has left."""
        self._queue.dead_letter(self, reason)
        self.settled = True

    def extend(self, seconds: Duration | None = None) -> None:
        """Move the lease's end to ``seconds`` from now (None: the queue's lease as
        stored now)."""
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
