"""One way for a test to wait: on an observable condition, bounded, never on a guess of time.

A test that sleeps "long enough" is slow when the guess is generous and flaky when the
machine is slower than the guess. ``wait_for`` polls the condition instead and returns as
soon as it holds; the timeout is only the point at which the test gives up and fails.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_for(condition: Callable[[], object], timeout: float = 30.0,
             what: str = "condition", step: float = 0.02) -> Any:
    """Poll ``condition`` until it returns something truthy, and return that.

    Fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(step)


def wait_until(condition: Callable[[], object], timeout: float = 10.0,
               step: float = 0.02) -> bool:
    """Like ``wait_for`` but answer False at the timeout, for a test that asserts on it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(step)
    return bool(condition())


def wait_past(clock: Callable[[], float], moment: float, timeout: float = 10.0) -> None:
    """Wait until ``clock`` (a broker's ``now``, the database's on PostgreSQL) passes ``moment``.

    Sleeps for what the clock says is left, then reads it again: a read or two, not a poll.
    """
    deadline = time.monotonic() + timeout
    while (left := moment - clock()) >= 0:
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for the clock to pass "
                                 f"{moment} ({left:.3f} s left)")
        time.sleep(min(left + 0.002, max(deadline - time.monotonic(), 0.0)))


def clear_of_slot_end(margin: float = 2.5, slot: float = 10.0) -> None:
    """Wait until the current figures slot (10 s) has ``margin`` seconds left, so that what
    a test records and reads lands in one slot (broker clocks and this host's agree well
    within a slot)."""
    left = slot - time.time() % slot
    if left < margin:
        time.sleep(left + 0.1)
