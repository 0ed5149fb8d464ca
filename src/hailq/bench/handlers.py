"""Handlers for the worker benchmark, imported by ``hailq worker`` subprocesses.

``hailq worker hailq.bench.handlers:noop`` acks every message at once;
``hailq worker hailq.bench.handlers:noop_after_go`` does too, once the file named
by the body's ``"go"`` key exists (until then every handler that starts waits for
it), so that workers can start on a full queue and the benchmark times the drain
from the moment it creates that file;
``hailq worker hailq.bench.handlers:record_start`` appends
``"{message.id} {time.time()}"`` to the file named by the body's ``"out"``
key the moment the handler starts, so the benchmark can compare it with the
time ``send()`` returned in the sending process.
"""

from __future__ import annotations

import os
import threading
import time

from hailq.queue import Message

_write_lock = threading.Lock()
_gone: set[str] = set()  # "go" files seen: later messages need not look for them
GO_TIMEOUT = 300.0  # seconds a handler waits for its "go" file before it fails


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


def noop_after_go(message: Message) -> None:
    """Wait until the file named by body["go"] exists, then do nothing (the message is
    acked when this returns). Once that file was seen, return at once."""
    body = message.body
    if not isinstance(body, dict) or not isinstance(body.get("go"), str):
        raise ValueError(f"noop_after_go needs a body like {{'go': PATH}}, got {body!r}")
    go = body["go"]
    if go in _gone:
        return
    deadline = time.monotonic() + GO_TIMEOUT
    while not os.path.exists(go):
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {go} after {GO_TIMEOUT:g} s")
        time.sleep(0.001)  # the drain's clock starts when the file appears: look often
    _gone.add(go)
