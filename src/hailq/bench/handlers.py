"""Handlers for the worker benchmark, imported by ``hailq worker`` subprocesses.

``hailq worker hailq.bench.handlers:noop`` acks every message at once;
``hailq worker hailq.bench.handlers:record_start`` appends
``"{message.id} {time.time()}"`` to the file named by the body's ``"out"``
key the moment the handler starts, so the benchmark can compare it with the
time ``send()`` returned in the sending process.
"""

from __future__ import annotations

import threading
import time

from hailq.queue import Message

_write_lock = threading.Lock()


def noop(message: Message) -> None:
    """Do nothing: the message is acked when this returns."""


def record_start(message: Message) -> None:
    """Append this message's id and the wall-clock time the handler started to body["out"]."""
    started = time.time()
    body = message.body
    if not isinstance(body, dict) or not isinstance(body.get("out"), str):
        raise ValueError(f"record_start needs a body like {{'out': PATH}}, got {body!r}")
    line = f"{message.id} {started!r}\n"
    with _write_lock, open(body["out"], "a", encoding="utf-8") as out:
        out.write(line)
