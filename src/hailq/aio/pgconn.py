"""psycopg's ``AsyncConnection``, waiting for its answers at a lower cost to the loop.

psycopg's ``AsyncConnection.wait`` registers the socket with the event loop before
every wait and unregisters it after, and sets a timer each time (to look again every
0.1 s): on one statement that is several Python-level selector operations, and they
made an async statement cost about twice the CPU of a sync one. ``LoopConnection``
keeps its socket registered while statements follow one another and wakes the one
waiting statement from its reader; whatever it does not cover (a wait with a
timeout, a wait for writing, a second waiter) goes to psycopg's own ``wait``.

The registration never outlives the socket: it is dropped when the connection
closes, when libpq has dropped the connection (which closes the socket), when a wait
ends in an exception, and when something arrives that nobody waits for (a notice,
the server going away), so that a socket the loop keeps seeing readable never spins
it.

``wait`` is psycopg's own method, not its public API: ``connection_class`` gives this
class only on the psycopg releases hailq was tested on, and psycopg's own
``AsyncConnection`` (slower waits, the same answers) on any other."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Generator
from typing import Any, TypeVar

import psycopg
from psycopg.abc import PQGen
from psycopg.waiting import Ready, Wait

RV = TypeVar("RV")
_OK = psycopg.pq.ConnStatus.OK
_ACTIVE = psycopg.pq.TransactionStatus.ACTIVE
_INTERVAL = 0.1  # psycopg's own, for the waits handed to it
# What psycopg answers by cancelling the statement on the server (as its ``wait`` does).
_INTERRUPTED = (asyncio.CancelledError, KeyboardInterrupt, SystemExit)
# The psycopg releases whose ``AsyncConnection.wait`` hailq's tests ran this class on.
TESTED_FROM, TESTED_BELOW = (3, 2, 4), (3, 4)


def connection_class() -> type[psycopg.AsyncConnection[Any]]:
    """``LoopConnection`` on a tested psycopg release, psycopg's own class otherwise."""
    found = tuple(int(n) for n in re.findall(r"\d+", psycopg.__version__)[:3])
    if TESTED_FROM <= found < TESTED_BELOW:
        return LoopConnection
    return psycopg.AsyncConnection


class LoopConnection(psycopg.AsyncConnection[Any]):
    """An ``AsyncConnection`` whose waits for an answer keep its socket registered
    with the event loop (see the module's docstring); otherwise psycopg's own."""

    _watched_by: asyncio.AbstractEventLoop | None = None  # the loop that reads for it
    _fd = -1
    _woken: asyncio.Future[None] | None = None  # the wait in progress
    _kept: psycopg.AsyncCursor[Any] | None = None

    def kept_cursor(self) -> psycopg.AsyncCursor[Any]:
        """One cursor for the statements that run through this connection one after
        another, their rows fetched before the next: a new cursor builds its adapters
        anew, which cost a statement a quarter of its CPU. It keeps only the last
        statement's result."""
        cur = self._kept
        if cur is None or cur.closed:
            cur = self._kept = self.cursor()
        return cur

    async def wait(self, gen: PQGen[RV], interval: float = _INTERVAL,
                   timeout: float | None = None) -> RV:
        if timeout is not None or self._woken is not None:
            self._unwatch()
            return await self._psycopg_wait(gen, interval, timeout)
        loop = asyncio.get_running_loop()
        try:
            state = next(gen)  # (sends the statement: no wait yet)
            while True:
                if state != Wait.R:  # writing too (a long statement): rare, psycopg's
                    self._unwatch()
                    return await self._psycopg_wait(_resumed(state, gen), interval, None)
                if self._watched_by is not loop:
                    self._watch(loop)
                self._woken = woken = loop.create_future()
                try:
                    await woken
                finally:
                    self._woken = None
                state = gen.send(Ready.R)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        except _INTERRUPTED:
            self._unwatch()
            if self.pgconn.transaction_status == _ACTIVE:
                # As psycopg's own wait: cancel the statement, read what is left.
                try:
                    await self.cancel_safe(timeout=5.0)
                    await self._psycopg_wait(_resumed(None, gen), interval, 5.0)
                except Exception:  # the interruption is what is raised
                    pass
            raise
        except BaseException:
            self._unwatch()  # libpq may have closed the socket
            raise
        finally:
            if self._watched_by is not None and self.pgconn.status != _OK:
                self._unwatch()  # the connection was lost: libpq closed the socket

    async def _psycopg_wait(self, gen: PQGen[RV], interval: float,
                            timeout: float | None) -> RV:
        if timeout is None:  # (psycopg before 3.3 takes no timeout)
            return await super().wait(gen, interval)
        return await super().wait(gen, interval, timeout)

    def _watch(self, loop: asyncio.AbstractEventLoop) -> None:
        self._unwatch()
        fd = self.pgconn.socket
        loop.add_reader(fd, self._on_readable)
        self._watched_by, self._fd = loop, fd

    def _unwatch(self) -> None:
        loop, self._watched_by = self._watched_by, None
        if loop is not None and not loop.is_closed():
            loop.remove_reader(self._fd)

    def _on_readable(self) -> None:
        woken = self._woken
        if woken is None:
            self._unwatch()  # nobody asked: the next statement's psycopg reads it
            return
        # Read what came now: the loop's next turn (which resumes the statement) then
        # does not see the socket readable again, and a statement whose answer came
        # in parts is resumed once, when its answer is whole. What a failed read
        # means, the statement's own next read says.
        try:
            self.pgconn.consume_input()
            if self.pgconn.is_busy():
                return
        except psycopg.Error:
            pass
        if not woken.done():
            woken.set_result(None)

    async def close(self) -> None:
        self._unwatch()
        await super().close()


def _resumed(state: Wait | None, gen: PQGen[RV]) -> Generator[Any, Any, RV]:
    """``gen`` from where it waits for ``state`` on (or from its next step if None)."""
    ready: Any = None  # psycopg's generators take None as "look again"
    if state is not None:
        ready = yield state
    while True:
        try:
            state = gen.send(ready)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        ready = yield state
