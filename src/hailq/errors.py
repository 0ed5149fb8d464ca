"""The exception tree. Every error hailq raises on purpose is a ``HailqError``, but one:
``TimeLimitExceeded`` (``hailq/runtime/timelimit.py``), raised into a handler past its
time limit, is a ``BaseException`` so that a handler's ``except Exception`` cannot
swallow the stop; it is exported here with the others a handler may see."""

from __future__ import annotations


class HailqError(Exception):
    """Root of every error hailq raises on purpose."""


class InvalidArgument(HailqError, ValueError):
    """An argument was rejected before anything was written.

    The message says what was wrong and what is allowed.
    """


class MessageTooLarge(InvalidArgument):
    """An encoded body is larger than the queue's ``max_message_size``."""


class BackendUnavailable(HailqError):
    """The URL names a backend whose optional part is not installed.

    Raised before anything is opened; the message says what to install, e.g.
    ``pip install 'hailq[postgres]'`` for PostgreSQL.
    """


class NotFound(HailqError, LookupError):
    """Something named does not exist: the parent of each "not found" below, which are
    siblings (catch this one for any of them)."""


class QueueNotFound(NotFound):
    """The named queue has never been declared (or was deleted)."""


class TopicNotFound(NotFound):
    """The named topic has never been declared (or was deleted)."""


class SubscriptionNotFound(NotFound):
    """The named queue is not a subscription of the topic."""


class QueueNotEmpty(HailqError):
    """A queue that still holds messages (live or dead) was to be deleted without
    ``force``; nothing was deleted."""


class TopicHasSubscriptions(HailqError):
    """A topic that still has subscriptions was to be deleted without ``force``;
    nothing was deleted."""


class LeaseLost(HailqError):
    """The receipt no longer names the message's current lease.

    The message was received again since (or no longer exists), so the
    operation changed nothing. Under rule 22 the caller's transaction was
    rolled back.
    """


class MessageNotFound(NotFound):
    """The queue holds no such message, or none in a state the operation applies to
    (cancel: an unknown, acked or dead message); nothing was written."""


class MessageCancelled(LeaseLost):
    """The message was cancelled by an operator (rule 40): its ack, nack or extend is
    refused, late or not, and changed nothing but to let the cancelled message go (its
    handler has stopped). A ``LeaseLost``, so code that handles a lost lease handles it."""


class StorageError(HailqError):
    """The storage backend failed: unreachable server, full disk, read-only file.

    The message names the database (never its password) and the cause.
    """

    #: Whether the failure belongs to a database outage this process is reporting, or a
    #: call the last one held up (its lines say it: others stay quiet about it).
    during_outage: bool = False


class OutcomeUnknown(StorageError):
    """The connection broke, or was dropped past its deadline, after the call reached the
    server: what it wrote may have been committed all the same (rule 31).

    A send that raises it may have stored its messages: retry it with the same
    ``dedup_id`` (the retry then stores each message once). ``cause`` is the failure;
    ``note`` says what it means for the call.
    """

    def __init__(self, cause: str, note: str = "what it wrote may have been committed "
                 "all the same") -> None:
        super().__init__(f"{cause}; {note}")
        self.cause = cause
        self.note = note


class SchemaError(StorageError):
    """The database schema is newer than this version of hailq, or damaged."""


class Retry(HailqError):
    """Raised by a handler: give the message back, after ``delay`` seconds if given.

    Without ``delay`` the queue's retry backoff applies. Counts as a failed attempt.
    """

    def __init__(self, delay: float | None = None, reason: str = "retry requested") -> None:
        super().__init__(reason)
        self.delay = delay
        self.reason = reason


class DeadLetter(HailqError):
    """Raised by a handler: move the message to the dead-letter queue now, with ``reason``."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ScheduleNotFound(NotFound):
    """No periodic schedule has that name."""
