"""Slots and the messages in them: how many are free, and what to give back at the end.

A message is *held* from dispatch until its handler ends, then *settling*
while its ack/nack is handed on; ``give_back_all`` (shutdown stage 2) takes
only held ones, so a settled message is never also given back. Each message occupies
one numbered slot (1 to ``capacity``) from dispatch until ``done``: the slot a claim
names in history (rule 40) is the one the message then runs in.
"""

from __future__ import annotations

import threading
import time

from hailq.queue import Message
from hailq.runtime.held import HeldTable


class InFlight:
    """At most ``capacity`` messages at a time; thread-safe. With ``table`` (a process
    pool's child), each held lease is also noted where the supervisor can read it."""

    def __init__(self, capacity: int, table: HeldTable | None = None) -> None:
        self.capacity = capacity
        self._table = table
        self._held: dict[str, Message] = {}
        self._since: dict[str, float] = {}  # receipt -> when its handler got it (monotonic)
        self._slot: dict[str, int] = {}  # receipt -> the slot it occupies until done
        self._settling: set[str] = set()
        self._closed = False
        self._changed = threading.Condition()

    def __len__(self) -> int:
        with self._changed:
            return len(self._held) + len(self._settling)

    def wait_free(self, timeout: float) -> int:
        """The number of free slots, after waiting up to ``timeout`` for at least one."""
        with self._changed:
            if self._full():
                self._changed.wait(timeout)
            return max(self.capacity - len(self._held) - len(self._settling), 0)

    def _full(self) -> bool:
        return len(self._held) + len(self._settling) >= self.capacity

    def free_slots(self) -> list[int]:
        """The numbers of the free slots, lowest first."""
        with self._changed:
            taken = set(self._slot.values())
        return [n for n in range(1, self.capacity + 1) if n not in taken]

    def add(self, message: Message, slot: int | None = None) -> bool:
        """Hold ``message`` in ``slot`` (None: the lowest free); False once closed (the
        caller must give it back itself)."""
        with self._changed:
            if self._closed:
                return False
            if slot is None:
                taken = set(self._slot.values())
                slot = next((n for n in range(1, self.capacity + 1) if n not in taken), 0)
            self._held[message.receipt] = message
            self._since[message.receipt] = time.monotonic()
            self._slot[message.receipt] = slot
        if self._table is not None:
            self._table.hold(message.queue, message.receipt, message.attempt)
        return True

    def settle(self, message: Message) -> bool:
        """Mark its handler done; False if the message was already given back."""
        with self._changed:
            self._since.pop(message.receipt, None)
            if self._held.pop(message.receipt, None) is None:
                return False
            self._settling.add(message.receipt)
            return True

    def done(self, message: Message) -> None:
        """Free the slot after the message was settled."""
        if self._table is not None:
            self._table.release(message.receipt)
        with self._changed:
            self._settling.discard(message.receipt)
            self._slot.pop(message.receipt, None)
            self._changed.notify_all()

    def running(self) -> list[tuple[Message, float]]:
        """The held messages with the seconds their handlers have run, longest first."""
        now = time.monotonic()
        with self._changed:
            found = [(m, now - self._since.get(r, now)) for r, m in self._held.items()]
        return sorted(found, key=lambda pair: -pair[1])

    def wait_empty(self, deadline: float, give_up: threading.Event | None = None) -> bool:
        """Wait until nothing is in flight or ``deadline`` (monotonic) passes."""
        with self._changed:
            while self._held or self._settling:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or (give_up is not None and give_up.is_set()):
                    return False
                self._changed.wait(min(remaining, 0.1))
            return True

    def close(self) -> list[Message]:
        """Stop taking messages; return the held ones (their handlers are still running)."""
        with self._changed:
            self._closed = True
            held = list(self._held.values())
            for receipt in self._held:
                self._slot.pop(receipt, None)
            self._held.clear()
            self._since.clear()
            self._changed.notify_all()
            return held
