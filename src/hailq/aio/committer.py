"""Producers that share commits on an event loop (``hailq/committer.py``'s rules, for
hailq.aio on PostgreSQL, whose storage calls run in greenlets on the loop).

The thread committer cannot serve there: a send that waits for a shared commit would
block the loop's thread on a future only the loop can complete. Here a send that
overlaps others waits by awaiting (its greenlet switches back to the loop), and one
task of the loop sends every group, each in a greenlet of its own, one after the
other, the group's statements awaited like any call's. The group's make-up, its
order (a dedup id still dedups), and who is told of a failure are the thread
committer's own code (``Committer._commit`` and ``_outage``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from hailq.aio.greenlets import await_only, driven, spawn
from hailq.backends.base import NewMessage
from hailq.committer import Committer, _Awaited, take_group


class LoopCommitter(Committer):
    """The sends of one async PostgreSQL broker: alone when nothing else is in flight,
    else in the next shared transaction, sent by a task of ``loop``."""

    def __init__(self, send: Callable[[Sequence[NewMessage]], list[str]],
                 loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(send)
        self._loop = loop
        self._sender: asyncio.Task[None] | None = None

    def send(self, messages: Sequence[NewMessage]) -> list[str]:
        in_flight = self._in_flight
        in_flight.append(None)
        try:
            # Alone, in an outage (each send within its own deadline, rule 31), or from
            # outside the loop's greenlets (a thread of the broker's): sent at once.
            if len(in_flight) == 1 or not self.healthy or not driven():
                sent = self._send(messages)
                self.healthy = True
                return sent
            future: asyncio.Future[list[str]] = self._loop.create_future()
            self._pending.append(_Awaited(messages, future, None))  # settled on this loop
            if self._sender is None or self._sender.done():
                self._sender = self._loop.create_task(self._send_groups())
            return await_only(future, self._loop)
        finally:
            in_flight.pop()

    async def _send_groups(self) -> None:
        while self._pending:
            group = take_group(self._pending)
            await spawn(self._commit, [e for e in group if e.live()])

    def submit(self, messages: Sequence[NewMessage]) -> Any:
        """Closed on purpose: the thread committer's entry starts a committer thread and
        returns a future to block on, which would block the event loop; an async
        broker's sends share commits through ``send``, awaited on the loop."""
        raise NotImplementedError("an async broker's sends share commits through send()")
