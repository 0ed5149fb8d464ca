"""What a handler's end means for its message (SPEC rule 23). Pure, no I/O.

- returned: ack.
- raised ``hailq.Retry(delay)``: nack after ``delay`` (the queue's backoff if None).
- raised ``hailq.DeadLetter(reason)``: dead-letter now.
- raised anything else: nack with the queue's backoff; the error kept with the
  message is a short traceback (the innermost frames, cut to a few KB).
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from typing import Literal

from hailq.errors import DeadLetter, Retry

TRACEBACK_FRAMES = 5
MAX_ERROR_CHARS = 2000

Action = Literal["ack", "nack", "dead"]


@dataclass(frozen=True)
class Outcome:
    """How to settle one message: ``ack``, ``nack`` (with ``delay``) or ``dead``."""

    action: Action
    delay: float | None = None  # nack: None means the queue's retry backoff
    error: str | None = None
    asked: bool = False  # the handler asked for it (Retry, DeadLetter): no failure of it


ACK = Outcome("ack")


def outcome_of(error: BaseException | None) -> Outcome:
    """The outcome for a handler that raised ``error`` (None: it returned)."""
    if error is None:
        return ACK
    if isinstance(error, DeadLetter):
        return Outcome("dead", error=error.reason, asked=True)
    if isinstance(error, Retry):
        return Outcome("nack", delay=error.delay, error=error.reason, asked=True)
    return Outcome("nack", error=short_traceback(error))


def short_traceback(error: BaseException, frames: int = TRACEBACK_FRAMES,
                    limit: int = MAX_ERROR_CHARS) -> str:
    """The innermost ``frames`` frames and the exception line, at most ``limit`` characters.

    When cut, the start is dropped: the exception line at the end says most.
    """
    text = "".join(traceback.format_exception(type(error), error, error.__traceback__,
                                              limit=-frames)).rstrip()
    if len(text) > limit:
        text = "..." + text[-(limit - 3):]
    return text
