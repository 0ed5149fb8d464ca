"""Handlers the worker tests run in real worker processes.

Each records what it does in an *effects* database (a SQLite file named by
``HAILQ_TEST_EFFECTS``): one ``events`` row whenever a handler starts, and the
effect itself in ``effects`` through the inbox, in one transaction, so a
redelivered message is recognised and its effect is done exactly once.

A message body is a dict steering the handler: ``n`` (its number), ``sleep``
(seconds, on every attempt), ``sleep_first`` (seconds, on attempt 1 only),
``spin`` and ``spin_first`` (the same as a busy loop of Python bytecodes, which an
exception raised into the thread interrupts, unlike ``time.sleep``),
``do`` (``ok``, ``raise``, ``retry`` or ``dead``; ``*_first`` variants act on
attempt 1 only) and ``delay`` (for ``retry``).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
import time
from typing import Any

import hailq
from hailq.runtime import App

SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, message_id TEXT, queue TEXT, n INTEGER,
    attempt INTEGER, pid INTEGER, thread TEXT, at REAL);
CREATE TABLE IF NOT EXISTS effects (
    message_id TEXT, queue TEXT, n INTEGER, attempt INTEGER, at REAL);
"""


def effects_db(path: str | None = None) -> sqlite3.Connection:
    conn = sqlite3.connect(path or os.environ["HAILQ_TEST_EFFECTS"], timeout=60,
                           isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.executescript(SCHEMA)
    return conn


def _started(message: hailq.Message) -> dict[str, Any]:
    body = message.body if isinstance(message.body, dict) else {"n": message.body}
    conn = effects_db()
    try:
        conn.execute(
            "INSERT INTO events (message_id, queue, n, attempt, pid, thread, at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (message.id, message.queue, body.get("n"), message.attempt, os.getpid(),
             threading.current_thread().name, time.time()))
    finally:
        conn.close()
    return body


def _finish(message: hailq.Message, body: dict[str, Any]) -> None:
    do = body.get("do", "ok")
    first = message.attempt == 1
    if do == "raise" or (do == "raise_first" and first):
        raise ValueError(f"boom in claim {body.get('n')}")
    if do == "raise_undecodable" and first:  # bytes decoded with surrogateescape, and a NUL
        raise ValueError(b"caf\xe9\x00".decode("utf-8", "surrogateescape"))
    if do == "retry" or (do == "retry_first" and first):
        raise hailq.Retry(delay=body.get("delay"), reason="downstream busy")
    if do == "dead":
        raise hailq.DeadLetter(f"claim {body.get('n')} is malformed")
    conn = effects_db()
    try:
        conn.execute("BEGIN IMMEDIATE")
        if hailq.inbox(conn, "checker").record(message.id):
            conn.execute("INSERT INTO effects VALUES (?, ?, ?, ?, ?)",
                         (message.id, message.queue, body.get("n"), message.attempt,
                          time.time()))
        conn.execute("COMMIT")
    finally:
        conn.close()


def work(message: hailq.Message) -> None:
    """The synchronous test handler (see the module doc)."""
    body = _started(message)
    pause = body.get("sleep", 0) + (body.get("sleep_first", 0) if message.attempt == 1 else 0)
    if pause:
        time.sleep(pause)
    spin = body.get("spin", 0) + (body.get("spin_first", 0) if message.attempt == 1 else 0)
    if spin:
        until = time.monotonic() + spin
        while time.monotonic() < until:
            pass
    _finish(message, body)


async def work_async(message: hailq.Message) -> None:
    """The same as ``work``, as a coroutine; its pauses are ``asyncio.sleep``."""
    body = _started(message)
    pause = body.get("sleep", 0) + (body.get("sleep_first", 0) if message.attempt == 1 else 0)
    if pause:
        await asyncio.sleep(pause)
    _finish(message, body)


def seen(message: hailq.Message) -> None:
    """Only records the start: for order tests over many messages."""
    _started(message)


app = App("claims")
app.add("claims", work, lease=2, max_attempts=3, retry={"base": 0.05, "jitter": 0})
app.add("async-claims", work_async, lease=2, max_attempts=3, retry={"base": 0.05, "jitter": 0})

order_app = App("order")
order_app.add("high", seen)
order_app.add("low", seen)


def exit_on_poison(message: hailq.Message) -> None:
    """``work``, except that a body with ``"exit": true`` kills the process (no nack)."""
    body = _started(message)
    if body.get("exit"):
        os._exit(1)
    _finish(message, body)


poison_app = App("poison")
poison_app.add("poison", exit_on_poison, lease=0.5, max_attempts=6,
               retry={"base": 0.05, "jitter": 0})


LIMITED = {"lease": 2, "max_attempts": 3, "retry": {"base": 0.05, "jitter": 0}}
limits_app = App("limits")
limits_app.add("limited", work, time_limit=1, **LIMITED)
limits_app.add("limited-async", work_async, time_limit=1, **LIMITED)
limits_app.add("unlimited", work, **LIMITED)  # the worker's --time-limit, if any

# Rule 35: a schedule declared on the worker app, sent by every worker's scheduler.
periodic_app = App("periodic")
periodic_app.add("chores", seen)
periodic_app.periodic(every=1, queue="ticks", body="tick", name="tick")

# Rule 33: a queue limited to 2 starts a second, which an operator may change.
rates_app = App("rates")
rates_app.add("results", work, rate="2/s", burst=1)
