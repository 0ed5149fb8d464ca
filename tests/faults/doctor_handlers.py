"""Handlers that make the seed's four typical mistakes, for ``hailq doctor``'s tests (rule 26).

Run by real ``hailq worker`` processes. A body is a dict: ``poison`` (the message
fails, or kills its process), ``hold`` (seconds the handler keeps the GIL, as a C
call that never releases it does), ``n`` (its number). ``DOCTOR_EFFECTS`` names a
SQLite file for effects; ``DOCTOR_DOWNSTREAM`` a directory of lock files: a
downstream that serves only as many handlers at once as it has files.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

import hailq

EFFECTS = """CREATE TABLE IF NOT EXISTS effects (message_id TEXT, n INTEGER, attempt INTEGER)"""


def _body(message: hailq.Message) -> dict[str, Any]:
    return message.body if isinstance(message.body, dict) else {}


def ok(message: hailq.Message) -> None:
    time.sleep(float(_body(message).get("sleep", 0.01)))


def poison(message: hailq.Message) -> None:
    """A corrupt photo fails every checker that looks at it."""
    if _body(message).get("poison"):
        raise ValueError("corrupt photo")
    time.sleep(0.01)


def crash(message: hailq.Message) -> None:
    """A corrupt photo kills the checker's process (no nack: only the lease ends)."""
    if _body(message).get("poison"):
        os._exit(1)
    time.sleep(0.01)


_LIBC = ctypes.PyDLL(None)  # its functions run with the GIL held


def hold_gil(message: hailq.Message) -> None:
    """Work that keeps the GIL (a C extension that never releases it): the worker's lease
    renewals cannot run meanwhile, so a lease shorter than this work ends under it."""
    _LIBC.usleep(int(float(_body(message).get("hold", 2.0)) * 1_000_000))


def connect_effects() -> sqlite3.Connection:
    conn = sqlite3.connect(os.environ["DOCTOR_EFFECTS"], timeout=60)
    conn.execute(EFFECTS)
    conn.commit()
    return conn


def effect_plain(message: hailq.Message) -> None:
    """Writes its effect, then its first attempt fails as if the ack were lost: without an
    inbox the second attempt writes the effect again."""
    conn = connect_effects()
    try:
        with conn:
            conn.execute("INSERT INTO effects VALUES (?, ?, ?)",
                         (message.id, _body(message).get("n"), message.attempt))
    finally:
        conn.close()
    if message.attempt == 1:
        raise RuntimeError("the ack was lost after the effect")


def effect_inbox(message: hailq.Message) -> None:
    """The same, with the inbox: the second attempt finds the id and skips the effect."""
    conn = connect_effects()
    try:
        box = hailq.inbox(conn, "doctor")
        with conn:
            if box.record(message.id):
                conn.execute("INSERT INTO effects VALUES (?, ?, ?)",
                             (message.id, _body(message).get("n"), message.attempt))
    finally:
        conn.close()
    if message.attempt == 1:
        raise RuntimeError("the ack was lost after the effect")


def downstream(message: hailq.Message) -> None:
    """Writes to a downstream that serves as many handlers at once as it has lock files;
    the others wait for a free one, which their handler time shows."""
    folder = Path(os.environ["DOCTOR_DOWNSTREAM"])
    files = sorted(folder.glob("slot*"))
    while True:
        for path in files:
            fd = os.open(path, os.O_RDWR)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            try:
                time.sleep(float(_body(message).get("sleep", 0.2)))
                return
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
        time.sleep(0.002)
