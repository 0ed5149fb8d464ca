"""One shape for every background duty of a worker or ``hailq serve``.

A ``Service`` is a daemon thread that runs ``tick()`` again and again. Between ticks
it sleeps for what ``tick`` returned (``None``: its ``interval``), and ``wake()``
cuts the sleep short. ``close(deadline)`` stops it: the thread finishes the tick it
is in, ``closed()`` runs once after it (a last flush, a last report), and ``close``
returns within the deadline even if a tick hangs on the database. A tick that
raises is logged and the service goes on after ``retry`` seconds: a background duty
must outlive a passing outage.

Subclasses keep their own state under ``self.lock`` (a ``Condition``: the one the
sleep waits on, so a change made under it with ``notify`` wakes the thread too).

``Services`` starts a list of them in order and closes them in reverse, each within
what is left of one deadline. Parts that are not loops (a thread pool, an HTTP
server, a last flush) join the list through ``Step``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Protocol, TypeVar

from hailq.outage import covers

log = logging.getLogger("hailq.worker")


class Service:
    """A background duty: ``start()``, ``wake()``, ``close()``; subclasses write ``tick``."""

    name = "hailq-service"
    retry = 1.0  # seconds before a tick that raised is tried again

    def __init__(self, interval: float, *, wait_first: bool = False) -> None:
        """``interval``: seconds between ticks where ``tick`` names no other wait;
        ``wait_first``: sleep one interval before the first tick."""
        self.interval = interval
        self.lock = threading.Condition()
        self.closing = False
        self._woken = False
        self._wait_first = wait_first
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def tick(self) -> float | None:
        """One round of the duty; the seconds until the next (None: ``interval``). Every
        service writes its own: the base has no duty of its own."""
        raise NotImplementedError

    def closed(self) -> None:
        """Runs once, after the thread has stopped (or the deadline passed)."""

    def wake(self) -> None:
        """Tick now rather than at the end of the sleep."""
        with self.lock:
            self._woken = True
            self.lock.notify_all()

    def close(self, deadline: float = 5.0) -> None:
        """Stop ticking, wait up to ``deadline`` seconds for the thread, then ``closed()``."""
        with self.lock:
            self.closing = True
            self.lock.notify_all()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(max(deadline, 0.0))
        self.closed()

    def _run(self) -> None:
        wait: float | None = self.interval if self._wait_first else 0.0
        while self._sleep(wait):
            try:
                wait = self.tick()
            except Exception as exc:  # the duty must outlive a failure: log it, go on
                if not covers(exc):  # an outage has lines of its own (hailq/outage.py)
                    log.exception("%s: a round failed; trying again in %g s", self.name,
                                  self.retry)
                wait = self.retry

    def _sleep(self, wait: float | None) -> bool:
        """Sleep ``wait`` seconds (None: the interval) unless woken; False once closing."""
        seconds = self.interval if wait is None else wait
        with self.lock:
            if not self.closing and not self._woken and seconds > 0.0:
                self.lock.wait(seconds)
            self._woken = False
            return not self.closing


class Duty(Protocol):
    """What ``Services`` starts and closes: a ``Service``, or a ``Step``."""

    def start(self) -> None: ...

    def close(self, deadline: float = ...) -> None: ...


class Step:
    """A part with no loop of its own in a ``Services`` list: what to call at start and
    at close (either may be nothing)."""

    def __init__(self, start: Callable[[], object] | None = None,
                 close: Callable[[], object] | None = None) -> None:
        self._start, self._close = start, close

    def start(self) -> None:
        if self._start is not None:
            self._start()

    def close(self, deadline: float = 5.0) -> None:
        if self._close is not None:
            self._close()


D = TypeVar("D", bound=Duty)


class Services:
    """Services started in order and closed in reverse: the last started (which may
    lean on those before it) is the first stopped."""

    def __init__(self, services: Iterable[Duty] = ()) -> None:
        self._services = list(services)
        self._started: list[Duty] = []

    def add(self, service: D) -> D:
        self._services.append(service)
        return service

    def start(self) -> None:
        for service in self._services:
            service.start()
            self._started.append(service)

    def close(self, deadline: float = 10.0) -> None:
        """Close every started service, newest first, all within ``deadline`` seconds."""
        ends = time.monotonic() + deadline
        while self._started:
            self._started.pop().close(max(ends - time.monotonic(), 0.1))
