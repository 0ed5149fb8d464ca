"""Turning stored rows into the public data classes; shared by every backend."""

from __future__ import annotations

import json
from typing import Any

from hailq.codec import decode_body, decode_headers
from hailq.models import (
    AttemptError,
    DeadMessage,
    MessageDetails,
    PeekedMessage,
    QueueStats,
    State,
)


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


def details(queue: str, row: Any) -> MessageDetails:
    """One message as stored, in the state the next receive would find it (a read writes
    nothing): a due delay is ready, an ended lease ready again, or dead after the last
    attempt with the "lease expired" entry upkeep will add (as ``dead_list`` shows it)."""
    (id_, state, body, kind, headers, priority, key, attempt, enqueued_at, available_at,
     lease_until, dead_at, raw_errors, parked, max_attempts, park, now, cancelled_at) = row
    errors = parse_errors(raw_errors)
    is_parked = bool(parked)
    if cancelled_at is not None:  # rule 40: its handler is being stopped, or has been
        state = "cancelled"
        if lease_until is not None and lease_until <= now:
            lease_until = None
    elif state == "scheduled" and available_at <= now:
        state = "ready"
    elif state == "leased" and lease_until <= now:
        errors.append(AttemptError(int(attempt), "lease expired", float(lease_until)))
        if attempt >= max_attempts:
            state, dead_at, is_parked = "dead", lease_until, key is not None and bool(park)
        else:
            state, available_at = "ready", lease_until
        lease_until = None
    elif state != "leased":
        lease_until = None
    state_: State = state
    return MessageDetails(
        id=id_, queue=queue, state=state_, body=decode_body(body, kind),
        headers=decode_headers(headers), priority=priority, ordering_key=key,
        attempt=attempt, enqueued_at=enqueued_at, available_at=available_at,
        lease_until=None if lease_until is None else float(lease_until),
        dead_at=None if dead_at is None else float(dead_at), errors=errors,
        parked=is_parked)


def stats(queue: str, row: Any, now: float, parked: list[str],
          paused: bool = False) -> QueueStats:
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
        late_acks=int(late or 0), parked_keys=parked, paused=paused,
    )
