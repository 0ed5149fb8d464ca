"""Handlers the autoscaler tests run in real worker processes: sleep-bound work behind
an optional downstream that serves only so many at once.

``HAILQ_TEST_DOWNSTREAM`` names a folder of slot files: a handler holds an exclusive
``flock`` on one of them while it works, and waits for one to come free, as writers
wait for a results database that takes only so many connections. ``HAILQ_TEST_WORK``
is the seconds each message takes (default 0.1).
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

import hailq

WORK = float(os.environ.get("HAILQ_TEST_WORK", "0.1"))


def sleepy(message: hailq.Message) -> None:
    """Sleep-bound work, behind the downstream where there is one."""
    folder = os.environ.get("HAILQ_TEST_DOWNSTREAM")
    if not folder:
        time.sleep(WORK)
        return
    slots = sorted(Path(folder).glob("slot*"))
    while True:
        for slot in slots:
            handle = slot.open("a")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.close()
                continue
            try:
                time.sleep(WORK)
                return
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
                handle.close()
        time.sleep(0.002)  # every slot taken: the downstream is full
