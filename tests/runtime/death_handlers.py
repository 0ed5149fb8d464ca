"""Handlers whose worker process dies under them, for the process pool's death tests.

A body ``{"n": N, "kill": "SIGSEGV"}`` makes the handler send that signal to its own
process (a crash no ``except`` can see); ``{"n": N, "sleep_first": S}`` sleeps ``S``
seconds on attempt 1 only, so it is held when a sibling kills the process.
"""

from __future__ import annotations

import os
import signal
import time

from handlers import _finish, _started

import hailq
from hailq.runtime import App


def crash(message: hailq.Message) -> None:
    body = _started(message)
    if body.get("kill"):
        os.kill(os.getpid(), getattr(signal, body["kill"]))
        time.sleep(5)  # the signal ends the process before this
    if message.attempt == 1:
        time.sleep(body.get("sleep_first", 0))
    _finish(message, body)


app = App("deaths")
# Long leases: within a test, only the supervisor can have recorded the deaths.
app.add("fragile", crash, lease=60, max_attempts=2, retry={"base": 3, "jitter": 0})
app.add("steady", crash, lease=60, max_attempts=3, retry={"base": 0.05, "jitter": 0})
app.add("once", crash, lease=60, max_attempts=1)
