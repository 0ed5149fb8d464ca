"""History of finished messages (SPEC rule 40): what a search finds.

A queue declared or configured with ``retain`` (``"24h"``, seconds or a ``timedelta``)
keeps its acked, dead and cancelled messages for that long: ``broker.history(...)``,
``queue.history(...)`` and ``queue.finished(id)`` find them, with each attempt, its
error, its handler time and the consumer that ran it (docs/guides/history-and-cancel.md).
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from hailq.codec import Body, check_key, decode_body, decode_headers
from hailq.errors import InvalidArgument

HistoryOutcome = Literal["acked", "dead", "cancelled"]
OUTCOMES: tuple[HistoryOutcome, ...] = ("acked", "dead", "cancelled")
MAX_LIMIT = 1000


@dataclass(frozen=True, slots=True)
class HistoryAttempt:
    """One attempt of a finished message: who ran it, from when to when, and how it
    ended (``error`` is None for the attempt that succeeded)."""

    attempt: int
    error: str | None
    consumer: str | None  # "worker host:pid slot 2", "HTTP client", "library"; None: unknown
    started_at: float | None  # when it was claimed (broker clock); None: not known
    ended_at: float

    @property
    def handler_time(self) -> float | None:
        """Seconds from its claim to its ack, nack or end of lease; None if not known."""
        return None if self.started_at is None else max(self.ended_at - self.started_at, 0.0)


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """A finished message as history keeps it."""

    id: str
    queue: str
    outcome: HistoryOutcome
    body: Body | None  # None: the queue keeps no bodies (retain_bodies=False)
    headers: dict[str, str]
    priority: int
    ordering_key: str | None
    dedup_id: str | None
    enqueued_at: float
    finished_at: float
    attempts: list[HistoryAttempt] = field(default_factory=list)

    @property
    def consumer(self) -> str | None:
        """Who ran its last attempt."""
        return self.attempts[-1].consumer if self.attempts else None

    @property
    def handler_time(self) -> float | None:
        """Seconds its last attempt ran, from claim to ack (or to its end)."""
        return self.attempts[-1].handler_time if self.attempts else None

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready mapping (``hailq history --json``, ``GET /api/history``): a body
        as ``body`` and ``body_encoding`` ("json", "base64"; None: not kept)."""
        body = self.body
        return {
            "id": self.id, "queue": self.queue, "outcome": self.outcome,
            **({"body": base64.b64encode(body).decode("ascii"), "body_encoding": "base64"}
               if isinstance(body, bytes) else
               {"body": body, "body_encoding": None if body is None else "json"}),
            "headers": self.headers, "priority": self.priority,
            "ordering_key": self.ordering_key, "dedup_id": self.dedup_id,
            "enqueued_at": self.enqueued_at, "finished_at": self.finished_at,
            "consumer": self.consumer, "handler_time": self.handler_time,
            "attempts": [{"attempt": a.attempt, "error": a.error, "consumer": a.consumer,
                          "started_at": a.started_at, "ended_at": a.ended_at,
                          "handler_time": a.handler_time} for a in self.attempts]}


@dataclass(frozen=True, slots=True)
class HistoryQuery:
    """A search of history; every filter given must match. Times are epoch seconds (or
    datetimes) on the broker's clock: ``since`` inclusive, ``until`` exclusive."""

    queue: str | None = None
    id: str | None = None
    dedup_id: str | None = None
    header: tuple[str, str] | None = None  # (name, value): a header's value
    ordering_key: str | None = None
    outcome: HistoryOutcome | None = None
    since: float | None = None
    until: float | None = None
    limit: int = 100

    def __post_init__(self) -> None:
        for name in ("queue", "id", "dedup_id", "ordering_key"):
            value = getattr(self, name)
            if value is not None:
                check_key(value, name.replace("_", " "))
        if self.header is not None and (
                not isinstance(self.header, tuple) or len(self.header) != 2
                or not all(isinstance(v, str) and v for v in self.header)):
            raise InvalidArgument(f"header must be a (name, value) pair of non-empty "
                                      f"strings, got {self.header!r}")
        if self.outcome is not None and self.outcome not in OUTCOMES:
            raise InvalidArgument(f"outcome must be one of {', '.join(OUTCOMES)}, "
                                  f"got {self.outcome!r}")
        for name in ("since", "until"):
            value = getattr(self, name)
            if isinstance(value, datetime):
                object.__setattr__(self, name, value.timestamp())
            elif value is not None and (isinstance(value, bool)
                                        or not isinstance(value, int | float)):
                raise InvalidArgument(f"{name} must be epoch seconds or a datetime, "
                                      f"got {value!r}")
        if isinstance(self.limit, bool) or not isinstance(self.limit, int) \
                or not 1 <= self.limit <= MAX_LIMIT:
            raise InvalidArgument(f"limit must be an integer from 1 to {MAX_LIMIT}, "
                                  f"got {self.limit!r}")


# A search's time bound as written on a command line or in a URL (the API's schema says
# the same): a duration ago, epoch seconds, or an ISO 8601 date or time.
AGO = r"[0-9]{1,5}(\.[0-9]{1,3})?[smhd]"
EPOCH = r"[0-9]{1,12}(\.[0-9]{1,6})?"
ISO = (r"[12][0-9]{3}-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])(T([01][0-9]|2[0-3]):[0-5][0-9]"
       r"(:[0-5][0-9](\.[0-9]{1,6})?)?(Z|[+-](0[0-9]|1[0-3]):[0-5][0-9])?)?")
WHEN = re.compile(f"({AGO})|({EPOCH})|({ISO})")


def moment(value: str, now: float) -> float:
    """A search's time bound: a duration ago ("90s", "15m", "24h", "7d"), epoch
    seconds, or an ISO 8601 date or time (UTC unless it says)."""
    found = WHEN.fullmatch(value.strip())
    if found is None:
        raise InvalidArgument(f'a time must be a duration ago ("24h"), an ISO time '
                              f'("2026-12-06T17:00") or epoch seconds, got {value!r}')
    if found.group(1):
        return now - float(value.strip()[:-1]) * _UNIT[value.strip()[-1]]
    if found.group(3):
        return float(value)
    at = datetime.fromisoformat(value.strip())
    return (at if at.tzinfo is not None else at.replace(tzinfo=UTC)).timestamp()


_UNIT = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def entry(row: Any) -> HistoryEntry:
    """A stored history row (either backend) as a HistoryEntry."""
    (id_, queue, outcome, dedup_id, key, headers, priority, body, kind, attempts, errors,
     consumer, enqueued_at, started_at, finished_at) = row
    failed = json.loads(errors) if isinstance(errors, str | bytes) else (errors or [])
    tried = [HistoryAttempt(int(e["attempt"]), str(e["error"]), e.get("consumer"),
                            _float(e.get("started")), float(e["at"])) for e in failed]
    if outcome != "dead" or not tried or tried[-1].attempt != int(attempts):
        # The last attempt: the one that was acked (or cancelled, or died unstarted).
        tried.append(HistoryAttempt(int(attempts), None if outcome == "acked" else outcome,
                                    consumer, _float(started_at), float(finished_at)))
    return HistoryEntry(
        id=str(id_), queue=str(queue), outcome=outcome,
        body=None if body is None else decode_body(bytes(body), int(kind)),
        headers=decode_headers(headers), priority=int(priority), ordering_key=key,
        dedup_id=dedup_id, enqueued_at=float(enqueued_at), finished_at=float(finished_at),
        attempts=tried if int(attempts) > 0 else [])


def _float(value: Any) -> float | None:
    return None if value is None else float(value)
