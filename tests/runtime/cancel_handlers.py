"""Handlers the cancel tests run in real worker processes (rule 40).

Each records its start in the effects database (``handlers._started``), works in a
loop of Python bytecodes (an exception raised into the thread stops it, as it stops
most real work) for ``spin`` seconds, and then does its effect. Stopped by a cancel, it
records a ``stopped`` row (when, and whether its own ack was refused) and ends.
"""

from __future__ import annotations

import asyncio
import time

from handlers import _finish, _started, effects_db

import hailq
from hailq.runtime import App, HandlerCancelled


def _stopped(message: hailq.Message, refused: bool, at: float) -> None:
    conn = effects_db()
    try:
        conn.execute("CREATE TABLE IF NOT EXISTS stopped (message_id TEXT, at REAL, "
                     "refused INTEGER)")
        conn.execute("INSERT INTO stopped VALUES (?, ?, ?)",
                     (message.id, at, int(refused)))
    finally:
        conn.close()


def stoppable(message: hailq.Message) -> None:
    body = _started(message)
    until = time.monotonic() + body.get("spin", 0)
    try:
        while time.monotonic() < until:
            pass
    except HandlerCancelled:
        at = time.time()  # its work has stopped; what follows is its last word
        try:
            message.ack()  # a later ack of a cancelled message: refused
            refused = False
        except hailq.MessageCancelled:
            refused = True
        _stopped(message, refused, at)
        raise
    _finish(message, body)


async def stoppable_async(message: hailq.Message) -> None:
    body = _started(message)
    try:
        await asyncio.sleep(body.get("spin", 0))
    except asyncio.CancelledError:
        _stopped(message, True, time.time())
        raise
    _finish(message, body)


cancel_app = App("cancel")
cancel_app.add("cancellable", stoppable, lease=30, max_in_flight=1)
cancel_app.add("cancellable-keyed", stoppable, lease=30, on_dead="park")
cancel_app.add("cancellable-async", stoppable_async, lease=30, max_in_flight=1)
