"""Rule 31 on PostgreSQL: no call waits for ever on the server.

Three things can leave a call waiting, and each has its bound:

- **connecting** to a server that accepts TCP connections but never answers
  (a stopped server whose kernel still completes the handshake): libpq's
  ``connect_timeout``, per host of a multi-host URL;
- **a dead peer** (a host that vanished, a cut network): TCP keepalives on idle
  connections and ``tcp_user_timeout`` on busy ones, so the kernel gives up
  on a connection whose packets nobody acknowledges;
- **a server that acknowledges but never answers**: a commit waiting for a
  synchronous standby that is gone, a stopped (SIGSTOP) server, a pooler that
  stopped forwarding. TCP sees nothing wrong there, and ``statement_timeout``
  cannot end a commit that waits for a standby (it is committed locally
  already and keeps waiting). The ``Watchdog`` bounds these: past a call's
  deadline it shuts the connection's socket down, which ends the wait in the
  calling thread with a broken connection that the pool then discards.

The libpq settings are defaults: a URL that sets one keeps its own value.
"""

from __future__ import annotations

import contextlib
import math
import os
import socket
import threading
import time
import weakref
from collections.abc import Iterator
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

# Seconds a connection may sit idle before the kernel probes it, between probes, and
# probes unanswered before it gives up: a dead idle peer is noticed within ~25 s.
KEEPALIVES = {"keepalives": "1", "keepalives_idle": "10", "keepalives_interval": "5",
              "keepalives_count": "3"}
_CONNECT_MAX = 5  # seconds per host, unless the URL says (libpq's minimum is 2)


def with_defaults(conninfo: str, timeout: float) -> str:
    """``conninfo`` with hailq's bounds on connecting and on dead peers wherever the URL
    sets none: ``connect_timeout`` (at most 5 s per host, within ``timeout``), TCP
    keepalives, and ``tcp_user_timeout`` (unacknowledged data for ``timeout`` seconds)."""
    given = conninfo_to_dict(conninfo)
    defaults = {"connect_timeout": str(max(2, min(_CONNECT_MAX, math.ceil(timeout)))),
                **KEEPALIVES, "tcp_user_timeout": str(int(timeout * 1000))}
    missing = {k: v for k, v in defaults.items() if k not in given}
    return make_conninfo(conninfo, **missing)


class Watch:
    """One call's deadline on one connection; ``fired`` once the watchdog dropped it."""

    __slots__ = ("conn", "deadline", "fired")

    def __init__(self, conn: psycopg.Connection[Any], deadline: float) -> None:
        self.conn = conn
        self.deadline = deadline  # time.monotonic()
        self.fired = False


class Watchdog:
    """Drops the connection of any call still running past its deadline.

    One thread per process, started on first use (and again after a fork), sleeping
    until the earliest deadline. Arming and disarming take a lock and no system call,
    so a call that finishes in time pays next to nothing. A forked child forgets the
    parent's calls: their sockets are the parent's too, and never the child's to shut.
    """

    def __init__(self) -> None:
        self._forget()
        _ALL.add(self)

    def _forget(self) -> None:
        """Start from nothing: at creation, and in a forked child (whose copy of the lock
        may have been held by a thread that the child does not have)."""
        self._lock = threading.Lock()
        self._armed: dict[int, Watch] = {}
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._next = math.inf  # when the thread wakes next, as it planned
        self._thread: threading.Thread | None = None

    @contextlib.contextmanager
    def watch(self, conn: psycopg.Connection[Any], deadline: float) -> Iterator[Watch]:
        """Bound what runs on ``conn`` inside the block by ``deadline`` (monotonic)."""
        w = self.arm(conn, deadline)
        try:
            yield w
        finally:
            self.disarm(w)

    def arm(self, conn: psycopg.Connection[Any], deadline: float) -> Watch:
        """Bound what runs on ``conn`` from now by ``deadline`` (monotonic), until
        ``disarm``: ``watch`` without a generator, for the calls on the hot path."""
        w = Watch(conn, deadline)
        self.renew(w, deadline)
        return w

    def disarm(self, w: Watch) -> None:
        """End ``w``; a connection it dropped as the call finished is closed, never
        handed on half-shut."""
        with self._lock:
            self._armed.pop(id(w), None)
        if w.fired:
            w.conn.close()

    def renew(self, w: Watch, deadline: float) -> None:
        """(Re)arm ``w`` for ``deadline``."""
        with self._lock:
            w.deadline = deadline
            self._armed[id(w)] = w
            if self._thread is None:
                self._start()
            elif deadline < self._next:
                self._wake.set()

    def close(self) -> None:
        """Stop the thread; a later ``watch`` starts a new one."""
        with self._lock:
            self._stop.set()
            self._wake.set()
            self._thread = None

    def _start(self) -> None:
        self._stop = threading.Event()  # the old thread, if any, keeps its own (set)
        self._thread = threading.Thread(target=self._run, args=(self._stop,),
                                        name="hailq-watchdog", daemon=True)
        self._thread.start()

    def _run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            now = time.monotonic()
            with self._lock:
                for w in self._armed.values():
                    if not w.fired and w.deadline <= now:
                        w.fired = True
                        _shut(w.conn)
                pending = [w.deadline for w in self._armed.values() if not w.fired]
                self._next = min(pending, default=now + 1.0)
                self._wake.clear()
            self._wake.wait(max(self._next - now, 0.001))


_ALL: weakref.WeakSet[Watchdog] = weakref.WeakSet()


def _forget_after_fork() -> None:
    for dog in list(_ALL):
        dog._forget()


os.register_at_fork(after_in_child=_forget_after_fork)


def _shut(conn: psycopg.Connection[Any]) -> None:
    """Shut the connection's socket down under libpq's feet: the thread waiting on it
    sees the connection closed at once. The descriptor stays libpq's (a duplicate is
    shut and closed), so libpq never works on a number the system gave to another file."""
    try:
        fd = conn.pgconn.socket
    except psycopg.Error:
        return  # closed already
    with contextlib.suppress(OSError):
        s = socket.socket(fileno=os.dup(fd))
        try:
            s.shutdown(socket.SHUT_RDWR)
        finally:
            s.close()
