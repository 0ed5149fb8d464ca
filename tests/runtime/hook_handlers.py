"""An app with hooks, run by tests/runtime/test_hooks.py in real worker processes.

Every hook call and handler run appends one JSON line to ``HAILQ_TEST_EFFECTS`` +
``.hooks``: ``[what, message id, detail]``. Queues: ``ok`` (returns), ``fails`` (raises
``ValueError``), ``retries`` (raises ``hailq.Retry``), ``async`` (an ``async def``
handler that records the request id ``around_handler`` made current).
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import hailq
from hailq.runtime import App

REQUEST_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("request_id",
                                                                        default=None)


def record(what: str, message: hailq.Message, detail: Any = None) -> None:
    with open(os.environ["HAILQ_TEST_EFFECTS"] + ".hooks", "a") as f:
        f.write(json.dumps([what, message.id, detail]) + "\n")


class Recorder(hailq.Hook):
    """Records each of its calls under its own letter."""

    def __init__(self, letter: str) -> None:
        self.letter = letter

    def around_handler(self, message: hailq.Message) -> Any:
        @contextmanager
        def around() -> Iterator[None]:
            record(f"{self.letter}.enter", message)
            token = REQUEST_ID.set(f"req-{message.id}")
            try:
                yield
            except BaseException as exc:
                record(f"{self.letter}.exit", message, type(exc).__name__)
                raise
            else:
                record(f"{self.letter}.exit", message)
            finally:
                REQUEST_ID.reset(token)

        return around()

    def before_handler(self, message: hailq.Message) -> None:
        record(f"{self.letter}.before", message)

    def after_handler(self, message: hailq.Message) -> None:
        record(f"{self.letter}.after", message)

    def on_failure(self, message: hailq.Message, error: BaseException) -> None:
        record(f"{self.letter}.failure", message, type(error).__name__)


class Broken(hailq.Hook):
    """Fails in every method."""

    def around_handler(self, message: hailq.Message) -> Any:
        raise RuntimeError("broken around_handler")

    def before_handler(self, message: hailq.Message) -> None:
        raise RuntimeError("broken before_handler")

    def after_handler(self, message: hailq.Message) -> None:
        raise RuntimeError("broken after_handler")

    def on_failure(self, message: hailq.Message, error: BaseException) -> None:
        raise RuntimeError("broken on_failure")


app = App("hooked")
app.hook(Recorder("A"))
app.hook(Broken())
app.hook(Recorder("B"))


@app.handler("ok")
def ok(message: hailq.Message) -> None:
    record("handler", message, message.headers)


@app.handler("fails", max_attempts=1)
def fails(message: hailq.Message) -> None:
    record("handler", message)
    raise ValueError("the claim is wrong")


@app.handler("retries", max_attempts=3, retry={"base": 60, "jitter": 0})
def retries(message: hailq.Message) -> None:
    record("handler", message)
    raise hailq.Retry(reason="later")


@app.handler("async")
async def in_a_coroutine(message: hailq.Message) -> None:
    await asyncio.sleep(0)
    record("handler", message, REQUEST_ID.get())
