"""LISTEN/NOTIFY wake-ups for long-polling receivers, re-established after any failure."""

from __future__ import annotations

import threading
import time
from collections import defaultdict

import psycopg
from psycopg import sql

from hailq.backends.postgres.deadline import Watchdog
from hailq.outage import Outage

# Seconds between the listening connection's questions to the server. A connection that
# only waits for notifications would wait for ever on a server that stopped answering
# without closing it (a frozen primary, whose kernel even answers TCP keepalives): its
# receivers would fall back to polling, and after a failover never hear the new primary.
_ASK_EVERY = 5.0


class Listener:
    """One LISTEN connection per broker; receivers wait on its generations.

    A receiver remembers (per thread) the generation it last saw, so a
    notification that arrives between its empty claim and its next wait is not
    lost. After every (re)connect all receivers are woken once, because
    notifications sent while the connection was down are gone.
    """

    def __init__(self, conninfo: str, channel: str, answer_within: float = 5.0,
                 outage: Outage | None = None) -> None:
        """``answer_within``: seconds the server has to answer the listener's periodic
        question before the connection is dropped and made again. ``outage``: where its
        failed connection attempts count (when it listens where the calls go)."""
        self._conninfo = conninfo
        self._outage = outage
        self._channel = channel
        self._answer_within = answer_within
        self._watchdog = Watchdog()
        self._cond = threading.Condition()
        self._gen: defaultdict[str, int] = defaultdict(int)
        self._epoch = 0  # bumped on every (re)connect: wakes everyone
        self._seen = threading.local()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.connected = threading.Event()

    def _state(self, queues: tuple[str, ...]) -> tuple[int, ...]:
        return (self._epoch, *(self._gen[q] for q in queues))

    def wait(self, queues: tuple[str, ...], timeout: float) -> None:
        """Return when one of ``queues`` was notified since this thread last looked for
        them, or after ``timeout``."""
        self._start()
        seen: dict[tuple[str, ...], tuple[int, ...]] = self._seen.__dict__.setdefault(
            "by_queues", {})
        with self._cond:
            before = seen.get(queues)
            if before is None or before == self._state(queues):
                before = self._state(queues)
                self._cond.wait_for(lambda: self._state(queues) != before, timeout)
            seen[queues] = self._state(queues)

    def state(self, queues: tuple[str, ...]) -> tuple[int, ...]:
        """A mark for ``wait_since``: notifications for ``queues`` after it count."""
        self._start()
        with self._cond:
            return self._state(queues)

    def wait_since(self, queues: tuple[str, ...], before: tuple[int, ...],
                   timeout: float) -> None:
        """Return when one of ``queues`` was notified (or the connection was made again)
        since ``state`` gave ``before``, or after ``timeout``."""
        self._start()
        with self._cond:
            self._cond.wait_for(lambda: self._state(queues) != before, timeout)

    def _start(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            with self._cond:
                if self._thread is None or not self._thread.is_alive():
                    self._thread = threading.Thread(target=self._run, name="hailq-listen",
                                                    daemon=True)
                    self._thread.start()

    def _run(self) -> None:
        delay = 0.05
        while not self._stop.is_set():
            connecting = True
            try:
                # The conninfo bounds connecting and notices a dead peer (deadline.py).
                with psycopg.connect(self._conninfo, autocommit=True) as conn:
                    connecting = False
                    conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._channel)))
                    self.connected.set()
                    if self._outage is not None:
                        self._outage.succeeded()
                    delay = 0.05
                    with self._cond:
                        self._epoch += 1
                        self._cond.notify_all()
                    asked = time.monotonic()
                    while not self._stop.is_set():
                        for note in conn.notifies(timeout=0.5):
                            with self._cond:
                                self._gen[note.payload] += 1
                                self._cond.notify_all()
                        if time.monotonic() - asked >= _ASK_EVERY:
                            # Notifications that come meanwhile wait in psycopg's backlog.
                            with self._watchdog.watch(
                                    conn, time.monotonic() + self._answer_within):
                                # Never prepared: the listen URL may go through a pooler.
                                conn.execute("SELECT 1", prepare=False)
                            asked = time.monotonic()
            except psycopg.Error as exc:
                if connecting and self._outage is not None:
                    # (a connection that broke is no outage by itself: killed sessions)
                    self._outage.failed(str(exc).strip().split("\n", 1)[0], attempt=True)
                self.connected.clear()
                self._stop.wait(delay)
                delay = min(delay * 2, 2.0)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        self._watchdog.close()
