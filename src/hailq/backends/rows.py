"""Turning stored rows into the public data classes; shared by every backend."""

from __future__ import annotations

import json
from typing import Any

from hailq.codec import decode_body, decode_headers
from hailq.models import AttemptError, DeadMessage, PeekedMessage, QueueStats, State


def parse_errors(raw: Any) -> list[AttemptError]:
    if raw is None:
        return []
    items = json.loads(raw) if isinstance(raw, str | bytes) else raw
    return [AttemptError(int(e["attempt"]), str(e["error"]), float(e["at"])) for e in items]


def dead_letter(queue: str, row: Any) -> DeadMessage:
    (id_, body, kind, headers, priority, key, attempt, enqueued_at, dead_at, errors,
     parked) = row
    return DeadMessage(
        id=id_, queue=queue, body=decode_body(body, kind), headers=decode_headers(headers),
        priority=priority, ordering_key=key, attempt=attempt, enqueued_at=enqueued_at,
        dead_at=dead_at, errors=parse_errors(errors), parked=bool(parked),
    )


def peeked(queue: str, row: Any) -> PeekedMessage:
    id_, state, body, kind, headers, priority, key, attempt, enqueued_at, available_at = row
    state_: State = state
    return PeekedMessage(
        id=id_, queue=queue, state=state_, body=decode_body(body, kind),
        headers=decode_headers(headers), priority=priority, ordering_key=key,
        attempt=attempt, enqueued_at=enqueued_at, available_at=available_at,
    )


def stats(queue: str, row: Any, now: float, parked: list[str]) -> QueueStats:
    """Build QueueStats from the one-snapshot stats row of either backend."""
    (ready, scheduled, leased, blocked, dead, oldest, present,
     sent, purged, nacked, redelivered, dead_lettered, late) = row
    sent, purged = int(sent or 0), int(purged or 0)
    return QueueStats(
        queue=queue, ready=int(ready), scheduled=int(scheduled), in_flight=int(leased),
        blocked=int(blocked), dead=int(dead),
        oldest_ready_age=None if oldest is None else max(now - oldest, 0.0),
        sent=sent, acked=max(sent - int(present) - purged, 0), nacked=int(nacked or 0),
        redelivered=int(redelivered or 0), dead_lettered=int(dead_lettered or 0),
        late_acks=int(late or 0), parked_keys=parked,
    )
