"""SIGTERM and SIGINT ask the worker to stop: the first drains, a second hurries.

Signal handlers only set a counter (no locks: a handler runs between two
bytecodes of the main thread, possibly while that thread holds a lock).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopFlag:
    """How often a stop was asked for. Safe to set from a signal handler or any thread."""

    def __init__(self) -> None:
        self.requests = 0

    def request(self) -> None:
        self.requests += 1

    @property
    def stopping(self) -> bool:
        """Stage 1: stop receiving, let in-flight handlers finish."""
        return self.requests >= 1

    @property
    def hurry(self) -> bool:
        """Asked twice: give back what is in flight now, without waiting out the grace."""
        return self.requests >= 2


@contextmanager
def stop_on_signals(flag: StopFlag,
                    signals: tuple[signal.Signals, ...] = STOP_SIGNALS) -> Iterator[None]:
    """While inside, the given signals request a stop on ``flag``.

    Only the main thread can install signal handlers; elsewhere this does nothing
    and the caller stops the worker with ``Worker.stop()``.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handle(signum: int, frame: FrameType | None) -> None:
        flag.request()

    previous = {s: signal.signal(s, handle) for s in signals}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
