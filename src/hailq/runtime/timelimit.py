"""Time limits per handler (SPEC rule 34): past its limit, an attempt fails.

At the deadline the worker first *records* the failure: it stops renewing the
lease and nacks the message with the error ``time limit (30 s) exceeded``, so
the retry backoff and, on the last attempt, the dead letter follow as for any
failure (rule 13), and the dead letter never reads "lease expired". Only then
is the handler stopped:

- an ``async def`` handler: its task is cancelled;
- a plain handler in a thread: ``TimeLimitExceeded`` is raised inside that
  thread (``PyThreadState_SetAsyncExc``). It arrives at the thread's next
  Python bytecode, so a blocking C call (``time.sleep``, a socket read without
  a timeout, a long NumPy operation) finishes first. The thread is then
  *abandoned*: a new thread takes its slot at once, and whatever the old one
  does when it ends (return, raise, ack) is ignored;
- in a process-pool child, the child ends itself right after recording
  (``os._exit(EXIT_TIME_LIMIT)``, as abrupt as SIGKILL), and the supervisor
  starts a new one without counting it as a crash.

``Watchdog`` keeps the deadlines; ``Running`` is one handler call it may stop.
"""

from __future__ import annotations

import ctypes
import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from datetime import timedelta
from typing import Any, Literal

from hailq.runtime.service import Service

log = logging.getLogger("hailq.worker")

EXIT_TIME_LIMIT = 86
"""Exit code of a process-pool child that ended itself after a handler's time limit."""

Stopped = Literal["ended", "cancelled", "interrupted"]

_set_async_exc = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.py_object)(
    ("PyThreadState_SetAsyncExc", ctypes.pythonapi))
# The same call with NULL: a thread's pending exception, not yet arrived, is dropped.
_clear_async_exc = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p)(
    ("PyThreadState_SetAsyncExc", ctypes.pythonapi))


class HandlerInterrupted(BaseException):
    """Raised inside a handler's thread that the worker stops: past its time limit
    (``TimeLimitExceeded``) or cancelled by an operator (``HandlerCancelled``).

    A ``BaseException``, like ``KeyboardInterrupt``: an ``except Exception`` in the
    handler does not swallow it; ``finally`` blocks and context managers still run.
    """


class TimeLimitExceeded(HandlerInterrupted):
    """Raised inside a handler's thread that ran past its time limit. By the time it
    arrives, the failure is recorded."""


class HandlerCancelled(HandlerInterrupted):
    """Raised inside a handler's thread whose message an operator cancelled (rule 40).
    The message is let go once the handler has stopped; its ack is refused."""


def check_time_limit(value: object, what: str = "time_limit") -> float | None:
    """``value`` (seconds or a ``timedelta``) as seconds (> 0, finite) or None;
    InvalidArgument otherwise."""
    from hailq.errors import InvalidArgument

    if value is None:
        return None
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not 0 < value < float("inf"):
        raise InvalidArgument(f"{what} must be a number of seconds > 0, or None for no "
                              f"limit, got {value!r}")
    return float(value)


class Running:
    """One handler call in one slot thread, which the watchdog may stop.

    Created in the slot thread that runs the handler. ``finish()`` is called there
    when the handler ends; after it, nothing is raised into the thread any more.
    """

    def __init__(self, message: Any, limit: float | None) -> None:
        self.message = message
        self.limit = limit
        self.thread = threading.current_thread()
        self.started = time.monotonic()
        self.expired = False  # the watchdog took the message over
        self.cancelled = False  # an operator cancelled the message (rule 40)
        self._lock = threading.Lock()
        self._active = True
        self._raised = False  # an exception was raised into the thread
        self._future: Future[Any] | None = None

    def attach(self, future: Future[Any]) -> bool:
        """Register the future of an async handler on the event loop; False (and the
        future cancelled) if the time limit passed already."""
        with self._lock:
            if self.expired or self.cancelled:
                future.cancel()
                return False
            self._future = future
            return True

    def finish(self) -> None:
        """The handler ended: from now on nothing is raised into this thread. One raised
        just before either arrives in here, inside the caller's ``try`` (which must catch
        it), or is dropped here: it never lands in what the slot does next (a cancelled
        message must be let go, its slot freed)."""
        with self._lock:
            self._active = False
            raised = self._raised
        if raised and self.thread is threading.current_thread() \
                and self.thread.ident is not None:
            _clear_async_exc(self.thread.ident, None)

    def stop(self, cancel: bool = False) -> Stopped:
        """Stop the handler (its failure is recorded already, or with ``cancel`` its
        message was cancelled): cancel an async one, raise into a thread
        (``TimeLimitExceeded``, or ``HandlerCancelled``). ``ended`` if it had ended."""
        with self._lock:
            if cancel:
                self.cancelled = True
            else:
                self.expired = True
            if not self._active:
                return "ended"
            if self._future is not None:
                self._future.cancel()
                return "cancelled"
            ident = self.thread.ident
            if ident is not None:
                raised = HandlerCancelled if cancel else TimeLimitExceeded
                _set_async_exc(ident, ctypes.py_object(raised))
                self._raised = True
            return "interrupted"


class Watchdog(Service):
    """Calls ``expire(running)`` in its own thread when a handler's limit has passed.

    ``watch`` at the start of a handler, ``forget`` when it ends (whichever comes
    first wins: ``expire`` decides with the worker's in-flight book whether the
    handler ended already). ``start()`` then ``close()``.
    """

    name = "hailq-time-limits"

    def __init__(self, expire: Callable[[Running], None], *,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        super().__init__(60.0)
        self._expire = expire
        self._now = monotonic
        self._due: list[tuple[float, int, Running]] = []
        self._live: set[int] = set()
        self._seq = itertools.count()

    def watch(self, running: Running) -> None:
        if running.limit is None:
            return
        with self.lock:
            heapq.heappush(self._due, (running.started + running.limit, next(self._seq),
                                       running))
            self._live.add(id(running))
            soonest = self._due[0][2] is running
        if soonest:
            self.wake()

    def forget(self, running: Running) -> None:
        if running.limit is None:
            return
        with self.lock:
            self._live.discard(id(running))

    def closed(self) -> None:
        with self.lock:
            self._due.clear()
            self._live.clear()

    def tick(self) -> float | None:
        with self.lock:
            while self._due and id(self._due[0][2]) not in self._live:
                heapq.heappop(self._due)  # ended in time
            if not self._due:
                return None
            wait = self._due[0][0] - self._now()
            if wait > 0.0:
                return max(wait, 0.001)
            _, _, running = heapq.heappop(self._due)
            self._live.discard(id(running))
        try:
            self._expire(running)
        except Exception:  # the watchdog must outlive a failure to record one
            log.exception("message %s: could not act on its time limit",
                          getattr(running.message, "id", "?"))
        return 0.0
