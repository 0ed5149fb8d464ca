"""A database outage in the log: one warning when the database becomes unreachable, at most
one line every 30 s while it stays so, and one when it answers again.

A backend reports every call that failed because the database could not be reached
(``failed``), every connection attempt that failed (``failed(..., attempt=True)``), and
every call that went through (``succeeded``, a single attribute test while all is well).
Everything else in the process that would log its own failure during the outage, the
driver's pool and the worker's loops, asks ``covers`` first and stays quiet: the
periodic line counts what failed meanwhile.
"""

from __future__ import annotations

import logging
import math
import threading
import time
import weakref
from collections.abc import Callable

from hailq.errors import StorageError

REPORT_EVERY = 30.0  # seconds between two lines about one outage

_ALL: weakref.WeakSet[Outage] = weakref.WeakSet()  # every backend's, in this process


class Outage:
    """The reachability of one database, as this process's calls to it find it."""

    def __init__(self, what: str, log: logging.Logger, *, every: float = REPORT_EVERY,
                 clock: Callable[[], float] = time.monotonic, lost: str = "unreachable",
                 back: str = "reconnected") -> None:
        """``what``: the database as the log names it (no password), e.g.
        ``PostgreSQL postgresql://app@db/prod``; ``clock``: monotonic seconds; ``lost``
        and ``back``: what the lines call the outage and its end (a file is not reached
        over a network: ``unavailable``, ``available again``)."""
        self._what = what
        self._lost = lost
        self._back_word = back
        self._log = log
        self._every = every
        self._clock = clock
        self._lock = threading.Lock()
        self._reached = False  # an outage is a database lost, not one never found
        self.since: float | None = None  # when the outage began; None while reachable
        self._back = -math.inf  # when the last one ended
        self._said = 0.0  # when the last line about it was written
        self._calls = self._attempts = 0  # failed since the last line
        self._cause = ""  # why, as the last of them said (an attempt's word first)
        self._all_calls = self._all_attempts = 0  # failed since the outage began
        _ALL.add(self)

    @property
    def down(self) -> bool:
        """Whether the database is unreachable as far as this process knows."""
        return self.since is not None

    def reached(self) -> None:
        """The database answered a connection: from now on, losing it is an outage."""
        self._reached = True

    def failed(self, error: str, *, attempt: bool = False, began: float | None = None,
               ) -> bool:
        """A call (or with ``attempt``, a connection attempt) failed because the database
        could not be reached; ``error`` says why, ``began`` when the call started (on the
        ``clock``). Logs when the outage begins, then at most once every ``every`` s.
        Returns whether an outage's lines cover the failure."""
        with self._lock:
            if not self._reached:
                return False  # never reached: the caller's own error says it all
            now = self._clock()
            if self.since is None and began is not None and began <= self._back:
                # A call the last outage held up past its deadline: no new outage.
                return True
            if attempt:
                self._attempts += 1
                self._all_attempts += 1
            else:
                self._calls += 1
                self._all_calls += 1
            if attempt or not self._attempts:
                # A failed connection attempt names the cause (refused, unknown host...);
                # a call that found no connection in time only says it waited.
                self._cause = error
            if self.since is None:
                self.since = self._said = now
                self._calls = self._attempts = 0
                self._cause = ""
                self._log.warning(
                    "%s is %s: %s; hailq keeps trying, and says so here at most every %g s "
                    "until it answers", self._what, self._lost, error, self._every)
            elif now - self._said >= self._every:
                self._log.warning("%s still %s after %.0f s: %s (%s failed in the last "
                                  "%.0f s)", self._what, self._lost, now - self.since, self._cause,
                                  _counts(self._calls, self._attempts), now - self._said)
                self._said = now
                self._calls = self._attempts = 0
                self._cause = ""
            return True

    def succeeded(self, began: float | None = None) -> None:
        """A call to the database went through: an outage, if one was under way, ends;
        unless the call ``began`` (on the ``clock``) before the outage did: a connection
        that a cut had not yet reached proves nothing of the database's return."""
        if self.since is None:
            return  # the usual case, on every call: nothing to take or say
        with self._lock:
            if self.since is None or (began is not None and began < self.since):
                return
            self._log.warning("%s %s after %.1f s (%s failed meanwhile)", self._what,
                              self._back_word, self._clock() - self.since,
                              _counts(self._all_calls, self._all_attempts))
            self.since = None
            self._back = self._clock()
            self._calls = self._attempts = self._all_calls = self._all_attempts = 0


class GaveWay(StorageError):
    """Background housekeeping (the figures' flush) found the database busy and gave way
    to the user's calls; it tries again at its next round, and says nothing of it."""


def covers(exc: BaseException) -> bool:
    """Whether ``exc`` is a storage error while an outage of a database this process uses
    is being reported (a line of its own would only repeat the outage's), or a
    background write that gave way on purpose."""
    if isinstance(exc, GaveWay):
        return True
    if isinstance(exc, StorageError) and exc.during_outage:
        return True  # (also a call the outage held up that failed after it ended)
    return isinstance(exc, StorageError) and any(o.since is not None for o in list(_ALL))


def _counts(calls: int, attempts: int) -> str:
    said = f"{calls} call{'' if calls == 1 else 's'}"
    if attempts:  # (none where nothing connects: a file)
        said += f" and {attempts} connection attempt{'' if attempts == 1 else 's'}"
    return said
