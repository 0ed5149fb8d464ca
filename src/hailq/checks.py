"""Argument checks of the public API: what a message, a batch or a limit may be.

Every check raises InvalidArgument (rule 27) before anything is written.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from hailq._time import Duration, seconds
from hailq.backends.base import NewMessage
from hailq.codec import Body, check_key, encode_body, encode_headers, storable_text
from hailq.errors import InvalidArgument
from hailq.ids import new_message_id
from hailq.settings import MAX_MESSAGE_SIZE_LIMIT

MAX_BATCH = 1000
MAX_ERROR_LENGTH = 4000
MAX_WAIT = 3600.0
MAX_LEASE = 12 * 3600.0


@dataclass(frozen=True)
class Envelope:
    """A body with its own send options, for ``send_many`` and ``publish``."""

    body: Body
    priority: int = 0
    ordering_key: str | None = None
    delay: Duration = 0
    headers: dict[str, str] | None = None
    dedup_id: str | None = None
    not_before: datetime | float | None = field(default=None)


def build_message(queue: str, e: Envelope, now: Any) -> NewMessage:
    """Validate one outgoing message and encode it. The queue's own settings (its
    largest body, dedup window, aging) are read where it is stored (rule 39)."""
    if isinstance(e.priority, bool) or not isinstance(e.priority, int) \
            or not 0 <= e.priority <= 9:
        raise InvalidArgument(f"priority must be an integer from 0 to 9, got {e.priority!r}")
    delay = seconds(e.delay, "delay", maximum=366 * 86400)
    if e.not_before is not None:
        if delay:
            raise InvalidArgument("give delay or not_before, not both")
        delay = _until(e.not_before, now)
    # The queue's own limit is read where the message is stored (rule 39); here only
    # what no queue allows.
    data, kind = encode_body(e.body, MAX_MESSAGE_SIZE_LIMIT)
    return NewMessage(
        queue=queue, id=new_message_id(), body=data, body_kind=kind,
        headers=encode_headers(e.headers), priority=e.priority,
        ordering_key=check_key(e.ordering_key, "ordering_key"), delay=delay,
        dedup_id=check_key(e.dedup_id, "dedup_id"),
    )


def _until(when: datetime | float, now: Any) -> float:
    if isinstance(when, datetime):
        if when.tzinfo is None:
            raise InvalidArgument("not_before must be timezone-aware (e.g. datetime.now(UTC))")
        target = when.timestamp()
    elif isinstance(when, int | float) and not isinstance(when, bool):
        target = float(when)
    else:
        raise InvalidArgument(f"not_before must be a datetime or epoch seconds, got {when!r}")
    return seconds(max(target - float(now()), 0.0), "not_before", maximum=366 * 86400)


def error_text(error: object, what: str = "error") -> str | None:
    if error is None:
        return None
    if not isinstance(error, str):
        raise InvalidArgument(f"{what} must be a string, got {type(error).__name__}")
    return storable_text(error[:MAX_ERROR_LENGTH])


def check_batch(items: object, what: str) -> list[Any]:
    """A batch argument as a list: any iterable of items, but not one item by itself
    (a string, bytes or a dict is iterable, and would quietly become many)."""
    if type(items) is list:  # the common case, before an ABC's isinstance check
        return list(items)
    if isinstance(items, str | bytes | bytearray | memoryview | dict) \
            or not isinstance(items, Iterable):
        raise InvalidArgument(f"{what} takes a list (or another iterable) of items, got "
                              f"{type(items).__name__}; put a single item in a list")
    return list(items)


def check_max_messages(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_BATCH:
        raise InvalidArgument(f"max_messages must be an integer from 1 to {MAX_BATCH}, "
                              f"got {value!r}")
    return value


def check_limit(limit: object) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 100_000:
        raise InvalidArgument(f"limit must be an integer from 1 to 100000, got {limit!r}")
    return limit

