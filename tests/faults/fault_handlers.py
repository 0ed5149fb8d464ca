"""Handlers that the fault tests run in real ``hailq worker`` processes.

``effect`` writes each message's effect through the inbox into the effects store
named by ``FAULTS_EFFECTS`` (see ``ledger.EffectStore``). A message body is
``{"n": number}`` plus optional steering: ``work`` (seconds to sleep before
the effect), ``exit`` (``os._exit(1)`` before the effect: the message kills its
worker process).

Run as ``python -m hailq.cli.worker fault_handlers:effect --queue Q`` with this
directory on ``PYTHONPATH``; the queue's settings come from the test that
declared it.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from typing import Any

from ledger import EffectStore, EffectWriter

import hailq

_local = threading.local()


def _writer() -> EffectWriter:
    writer: EffectWriter | None = getattr(_local, "writer", None)
    if writer is None:
        writer = EffectWriter(EffectStore.from_spec(os.environ["FAULTS_EFFECTS"]))
        _local.writer = writer
    return writer


def effect(message: hailq.Message) -> None:
    body: dict[str, Any] = message.body  # type: ignore[assignment]
    if body.get("exit"):
        os._exit(1)
    if body.get("work"):
        time.sleep(body["work"])
    writer = _writer()
    try:
        writer.apply(message.id, int(body["n"]), message.attempt, os.getpid(), time.time())
    except Exception:
        # A broken connection (a restarted server) is replaced on the next message;
        # raising nacks this one, which comes back and finds the inbox unchanged.
        _local.writer = None
        with contextlib.suppress(Exception):
            writer.close()
        raise
