"""Reading what the test handlers did, and measuring a worker process."""

from __future__ import annotations

import os
import sqlite3
import time
from typing import Any

from waiting import wait_for as wait_for  # the one shared wait, re-exported for the runtime tests


def rows(effects: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(effects, timeout=60)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def started(effects: str, queue: str | None = None) -> list[tuple[Any, ...]]:
    """``(n, attempt, queue, thread, pid)`` for every handler start, in start order."""
    sql = "SELECT n, attempt, queue, thread, pid FROM events"
    if queue is not None:
        return rows(effects, sql + " WHERE queue = ? ORDER BY seq", queue)
    return rows(effects, sql + " ORDER BY seq")


def done(effects: str) -> list[int]:
    """The numbers of the messages whose effect was committed, sorted (repeats kept)."""
    return sorted(n for (n,) in rows(effects, "SELECT n FROM effects"))


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (from /proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_share(pid: int, seconds: float) -> float:
    """The share of one CPU a process used over the next ``seconds``."""
    before, t0 = cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    return (cpu_seconds(pid) - before) / (time.monotonic() - t0)


