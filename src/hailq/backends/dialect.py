"""What a SQL dialect brings to the storage core: one connection's work (``Tx``) and
the dialect itself (connections, transactions, fast paths). ``core.py`` says what
happens in which order; a dialect only says how, in its own database's idiom."""

from __future__ import annotations

import contextlib
import functools
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Literal, NamedTuple, TypeVar

from hailq.backends.base import ClaimedRow, NewMessage, Receipt
from hailq.backends.history import Mark

T = TypeVar("T")


class Acked(NamedTuple):
    """A row an ack deleted (of the queue whose receipts the dialect was given)."""

    id: str
    token: str
    ordering_key: str | None
    late: bool


# Acked receipts, (queue, message id, token) -> whether the ack was late.
Outcome = dict[tuple[str, str, str], bool]


class Tx(ABC):
    """One connection at work, in its dialect's idiom. ``now`` is the clock's time for
    dialects that pass it to their statements, None where SQL reads the database's."""

    now: float | None
    conn: Any  # the driver's connection, for the dialect's own fast paths

    @abstractmethod
    def run(self, name: str, params: Mapping[str, Any]) -> list[Any]:
        """Execute statement ``name``; its rows."""

    @abstractmethod
    def exec(self, name: str, params: Mapping[str, Any]) -> int:
        """Execute statement ``name``; how many rows it changed."""

    @abstractmethod
    def has(self, name: str) -> bool:
        """Whether this dialect has statement ``name`` (see tests/backends)."""

    @abstractmethod
    def atomic(self) -> AbstractContextManager[None]:
        """Several statements that commit together (a no-op inside a transaction)."""

    def one(self, name: str, params: Mapping[str, Any]) -> Any:
        found = self.run(name, params)
        return found[0] if found else None

    def also(self, name: str, params: Mapping[str, Any]) -> None:
        """Run a dialect-only step where the dialect has it: SQLite counts in statements
        of their own what PostgreSQL counts inside the statement that changed the rows."""
        if self.has(name):
            self.exec(name, params)


class Dialect(ABC):
    """What one database brings to the core: connections, transactions, fast paths."""

    url_for_display: str
    # Whether ack_plain acks anything: a dialect whose units of work are each one
    # transaction has no round trip to save, and the core skips the call.
    acks_plain_apart = False

    # -- connections and transactions --------------------------------------------------

    @abstractmethod
    def work(self, fn: Callable[[Tx], T], *, durable: bool,
             rerun: Callable[[Tx], T] | None = None) -> T:
        """Run ``fn`` on one connection: in one write transaction, or, where the dialect
        autocommits statements, with ``tx.atomic()`` around those that go together.
        ``durable`` commits wait for the disk (sends, operators' changes); leases and
        acks need not (a lost one only causes a redelivery). A dialect that retries
        after a lost connection runs ``rerun`` where the first try's outcome is unknown."""

    def briefly(self) -> AbstractContextManager[None]:
        """Work begun inside waits for a busy database only briefly and gives way (the
        figures' flush, so that it never holds up a user's call); a server's database
        is not busy that way, so by default this changes nothing."""
        return contextlib.nullcontext()

    @abstractmethod
    def read(self, fn: Callable[[Tx], T]) -> T:
        """Run ``fn``'s reads; nothing is written."""

    # -- a caller's own connection (hailq/joined.py) -------------------------------------

    flavor: Literal["sqlite", "postgres"]

    @abstractmethod
    def caller_queries(self) -> Mapping[str, str]:
        """The named statements a send runs on a caller's connection, in this dialect's
        own parameter marks, durable where that is the statement's choice."""

    def caller_now(self) -> float | None:
        """The time a send's statements take on a caller's connection; None where the
        SQL reads the database's clock."""
        return None

    @abstractmethod
    def effect(self) -> AbstractContextManager[tuple[Tx, Any]]:
        """A durable transaction whose connection the caller also writes its effect with."""

    # -- fast paths ----------------------------------------------------------------------

    @functools.cached_property
    def keyed(self) -> set[str]:
        """Queues whose last acks found ordering keys (the core notes them after each
        ``ack``). Their acks skip the shortcuts for messages without a key, which would
        only miss, or take those that free keys themselves (SQLite's ``ack_in_time``):
        a guess, never a promise, since a missed shortcut falls back."""
        return set()

    @abstractmethod
    def insert(self, tx: Tx, messages: Sequence[NewMessage], rerun: bool = False) -> int:
        """Insert new messages (dedup already settled) and count them as sent; return how
        many rows were inserted (none for a queue without a row: it was deleted). With
        ``rerun`` (a first try's commit is unknown) rows stored already are skipped."""

    @abstractmethod
    def claim(self, tx: Tx, queue: str, n: int, lease: float,
              mark: Mark | None = None) -> list[ClaimedRow]:
        """Lease up to ``n`` ready rows in rule 16's order and count redeliveries; with
        ``mark`` (a queue that keeps history) write it on the rows too."""

    @abstractmethod
    def ack(self, tx: Tx, receipts: Sequence[Receipt]) -> list[Acked]:
        """Delete the rows the receipts still lease (their late acks counted)."""

    def ack_in_time(self, tx: Tx, receipts: Sequence[Receipt]) -> bool:
        """The commonest ack as a shortcut, where the dialect has one: one receipt, or
        several of one claim, every message still leased in time; keys are freed in the
        same transaction (rule 17) where the dialect frees them itself, or else only
        messages without one are taken. True: all of them were acked; False: not tried,
        or none was acked and nothing changed. Raises FastPathMissed when only some were
        acked, to be acked through ``ack`` in a fresh transaction."""
        return False

    def ack_plain(self, tx: Tx, receipts: Sequence[Receipt]) -> Outcome:
        """Acks of messages without a key, outside a transaction where statements
        autocommit (one round trip); the receipts it did not ack go through ``ack``.
        A dialect whose every unit of work is one transaction acks nothing here."""
        return {}

    def ack_claim(self, tx: Tx, receipts: Sequence[Receipt], queue: str, n: int,
                  lease: float, mark: Mark | None = None,
                  ) -> tuple[Outcome, list[ClaimedRow]] | None:
        """Acks of messages without a key and a claim of an uncapped queue in one step,
        where the dialect can; None where it cannot. Receipts it did not ack go through
        ``ack`` next."""
        return None

    @abstractmethod
    def extend(self, tx: Tx, receipts: Sequence[Receipt], seconds: float | None,
               ) -> dict[tuple[str, str], float]:
        """Move the leases' ends ``seconds`` on (None: the queue's stored lease, read
        where it is applied); the new deadline by (id, token) of each one still held."""

    def wake(self, tx: Tx, queues: Iterable[str]) -> None:  # noqa: B027 - optional
        """Tell waiting receivers that a capped queue has room (where they listen)."""

    @abstractmethod
    def wait(self, queues: Sequence[str], timeout: float) -> None: ...

    def sleep(self, seconds: float) -> None:
        """Let ``seconds`` pass: a driver of its own (hailq.aio) awaits instead."""
        time.sleep(seconds)

    # -- schema and clock ---------------------------------------------------------------

    @abstractmethod
    def schema_migrate(self) -> int: ...

    @abstractmethod
    def schema_version(self) -> int: ...

    @abstractmethod
    def schema_latest(self) -> int: ...

    @abstractmethod
    def clock_now(self) -> float: ...

    @abstractmethod
    def close(self) -> None: ...


class FastPathMissed(Exception):
    """A dialect's shortcut did not fit: roll back and run the general path."""
