"""What a ``--pool process`` child holds, in memory its supervisor can read after it died.

The child fetches its own messages; the supervisor sees none of them. So each
child writes the lease of every message it dispatches into a table of fixed
cells shared with its supervisor (one cell per slot, written and cleared by the
child alone), and clears the cell once the message's outcome is handed on. When
the child dies unasked (a segfault, SIGKILL, ``os._exit``), the supervisor reads
the cells, names the messages in its log line and nacks each with the cause
(rules 6 and 13: the attempt counts; the lease token makes a nack of a message
the child no longer held fail harmlessly with ``LeaseLost``).
"""

from __future__ import annotations

import ctypes
import logging
import signal
import threading
from dataclasses import dataclass
from multiprocessing.context import BaseContext
from typing import TYPE_CHECKING, Any

from hailq.errors import LeaseLost, QueueNotFound
from hailq.ids import RECEIPT_PATTERN
from hailq.settings import NAME_PATTERN

if TYPE_CHECKING:
    from hailq.broker import Broker

log = logging.getLogger("hailq.worker")

# A queue name (128), a receipt (62), an attempt and two separators fit in this.
CELL = 224


@dataclass(frozen=True)
class HeldLease:
    """One message a child held: its queue, the receipt of its lease, its attempt."""

    queue: str
    receipt: str
    attempt: int


class HeldTable:
    """``slots`` cells of leases, shared by a child (writes) and its supervisor (reads).

    Made by the supervisor and handed to the child as it is spawned; thread-safe in
    the child. Only lease receipts are kept: no body, nothing the database lacks.
    """

    def __init__(self, slots: int, context: BaseContext) -> None:
        self.slots = slots
        self._cells: Any = context.RawArray(ctypes.c_char, slots * CELL)
        self._setup()

    def _setup(self) -> None:
        self._lock = threading.Lock()
        self._where: dict[str, int] = {}  # receipt -> cell, in the child
        self._free = list(range(self.slots - 1, -1, -1))

    def __getstate__(self) -> dict[str, Any]:
        return {"slots": self.slots, "cells": self._cells}  # the child's own state is its

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.slots, self._cells = state["slots"], state["cells"]
        self._setup()

    def hold(self, queue: str, receipt: str, attempt: int) -> None:
        """Note a lease the child now holds (a full table notes nothing: the lease
        still ends by itself, as without a table)."""
        entry = f"{queue}\t{receipt}\t{attempt}".encode()
        if len(entry) >= CELL:
            return
        with self._lock:
            if receipt in self._where or not self._free:
                return
            cell = self._free.pop()
            self._where[receipt] = cell
            start = cell * CELL
            self._cells[start:start + CELL] = entry.ljust(CELL, b"\0")

    def release(self, receipt: str) -> None:
        """The lease's outcome is handed on (or it was given back): forget it."""
        with self._lock:
            cell = self._where.pop(receipt, None)
            if cell is None:
                return
            self._cells[cell * CELL] = b"\0"
            self._free.append(cell)

    def take(self) -> list[HeldLease]:
        """In the supervisor, once the child is gone: what it held; the table is then
        empty for the next child of the slot."""
        found = []
        for cell in range(self.slots):
            start = cell * CELL
            raw = bytes(self._cells[start:start + CELL]).split(b"\0", 1)[0]
            self._cells[start] = b"\0"
            held = _parse(raw)
            if held is not None:
                found.append(held)
        return found


def _parse(raw: bytes) -> HeldLease | None:
    """A cell's lease, or None for an empty cell or one cut by the child's death."""
    parts = raw.decode("ascii", "replace").split("\t")
    if len(parts) != 3 or not NAME_PATTERN.fullmatch(parts[0]) \
            or not RECEIPT_PATTERN.fullmatch(parts[1]) or not parts[2].isdigit():
        return None
    return HeldLease(parts[0], parts[1], int(parts[2]))


def exit_cause(exitcode: int | None) -> str:
    """``signal 11 (SIGSEGV)`` or ``code 1``: how a child process ended. A code above 128
    is how a shell between (a wrapper script as the interpreter) reports a signal."""
    if exitcode is None:
        return "an unknown status"
    if exitcode < 0:
        return f"signal {-exitcode}{_name(-exitcode, ' ({})')}"
    if 128 < exitcode < 128 + 65:
        return f"code {exitcode}{_name(exitcode - 128, ' (128 + {})')}"
    return f"code {exitcode}"


def _name(number: int, form: str) -> str:
    try:
        return form.format(signal.Signals(number).name)
    except ValueError:
        return ""


def held_text(held: list[HeldLease], most: int = 10) -> str:
    """`` while handling 2 message(s): claims/01AB… (attempt 1), …`` for a log line."""
    if not held:
        return ""
    named = ", ".join(f"{h.queue}/{h.receipt.split('.', 1)[0]} (attempt {h.attempt})"
                      for h in held[:most])
    more = f" and {len(held) - most} more" if len(held) > most else ""
    return f" while handling {len(held)} message(s): {named}{more}"


class DeathRecorder:
    """Fails the messages a dead child held: each is nacked with the cause of death, so
    the attempt counts and its error says why (a supervisor's own connection, opened at
    the first death that held any)."""

    def __init__(self, url: str, broker: Broker | None = None) -> None:
        self.url = url
        self._broker = broker  # given: the caller's, used and left open
        self._own = broker is None

    def fail(self, exitcode: int | None, held: list[HeldLease]) -> int:
        """Nack each of ``held``; return how many were recorded (a message the child had
        settled or given back after all is left alone: its lease token no longer holds)."""
        error = f"worker process exited with {exit_cause(exitcode)} while handling it"
        recorded = 0
        for lease in held:
            try:
                if self._broker is None:
                    import hailq

                    self._broker = hailq.connect(self.url, migrate=False)
                self._broker.get_queue(lease.queue).nack(lease.receipt, error=error,
                                                          attempt=lease.attempt)
                recorded += 1
            except (LeaseLost, QueueNotFound):
                continue
            except Exception as exc:  # the database may be down: the lease still ends
                log.warning("message %s of queue %s: could not record that its worker "
                            "process died (%s); it returns when its lease ends",
                            lease.receipt.split(".", 1)[0], lease.queue, exc)
        return recorded

    def close(self) -> None:
        if self._broker is not None and self._own:
            self._broker.close()
            self._broker = None
