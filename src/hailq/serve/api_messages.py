"""Routes that move messages: send (one or a batch), receive with long poll, ack, nack,
extend by receipt; and the looks at single messages: peek, show, delete, cancel.

All of them run on the async API (``hailq.aio``, the server's broker's async twin,
``polls.Polls.broker``): on PostgreSQL no thread is taken, on SQLite the call runs in
one of the async broker's threads, never in the server's pool."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from hailq.aio import AsyncQueue
from hailq.errors import InvalidArgument, LeaseLost, QueueNotFound
from hailq.message import Message
from hailq.serve import polls
from hailq.serve.api_io import (
    body_json,
    body_of,
    envelopes,
    errors_json,
    integer,
    name_param,
    number,
    ok,
    query_int,
    record,
    text,
)

MAX_PEEK = 1000


async def queue_of(request: Request) -> AsyncQueue:
    """The path's queue on the async broker; 404 (QueueNotFound) if it was never
    declared: a typo never creates a queue."""
    return await polls.polls_of(request).get_queue(name_param(request, "queue"))


async def send(request: Request) -> Response:
    """One message object, or ``{"messages": [...]}`` sent atomically: ``{"ids": [...]}``."""
    queue = await queue_of(request)
    items = envelopes(await body_of(request))
    ids = await queue.send_many(items)
    return ok({"ids": ids})


async def receive(request: Request) -> Response:
    """Lease up to ``max_messages``; with ``wait`` the request is held until a message
    arrives or ``wait`` seconds pass, woken by its queue's waiter (polls.py)."""
    leasing = await queue_of(request)  # no thread is held, even to find the queue
    data = await body_of(request, frozenset({"max_messages", "lease", "wait"}))
    limit = integer(data, "max_messages", 1, 1, 1000)
    lease = number(data, "lease")
    wait = number(data, "wait", 0.0) or 0.0
    max_wait: float = request.app.state.max_wait
    if not 0 <= wait <= max_wait:
        raise InvalidArgument(f"wait must be from 0 to {max_wait:g} seconds, got {wait:g}")

    leasing.sync.consumer = "HTTP client"  # as history records who ran each attempt (rule 40)

    async def lease_them() -> list[Message]:  # never waits: the poll waits (polls.py)
        return [m.sync for m in await leasing.receive(limit, lease=lease)]

    async def give_back(m: Message) -> None:  # its client left: back untried, never dead
        await leasing.give_back(m.receipt, polls.LEFT)

    got = await polls.receive(request, wait, lease_them, give_back, leasing.name)
    return ok({"messages": [_received(m) for m in got]})


def _received(m: Message) -> dict[str, Any]:
    return {"id": m.id, "receipt": m.receipt, **body_json(m.body), "priority": m.priority,
            "ordering_key": m.ordering_key, "headers": m.headers, "attempt": m.attempt,
            "enqueued_at": m.enqueued_at, "lease_until": m.lease_until,
            "fencing_token": m.fencing_token}


async def ack(request: Request) -> Response:
    """``{"receipts": [...]}``: per receipt whether it was acked, and whether late."""
    queue = await queue_of(request)
    data = await body_of(request, frozenset({"receipts"}))
    receipts = data.get("receipts")
    if not isinstance(receipts, list) or not receipts \
            or not all(isinstance(r, str) for r in receipts) or len(receipts) > 1000:
        raise InvalidArgument("receipts must be a list of 1 to 1000 receipt strings")
    results = await queue.ack_many(receipts)
    return ok({"results": [{"receipt": r, "acked": done is not None, "late": bool(done)}
                           for r, done in zip(receipts, results, strict=True)]})


async def nack(request: Request) -> Response:
    """``{"receipt", "delay", "error"}``; 409 when the receipt lost its lease."""
    queue = await queue_of(request)
    data = await body_of(request, frozenset({"receipt", "delay", "error"}))
    receipt = text(data, "receipt", required=True) or ""
    delay = number(data, "delay")
    error = text(data, "error")
    await queue.nack(receipt, delay=delay, error=error)
    return ok({"nacked": True})


async def extend(request: Request) -> Response:
    """``{"receipt", "seconds"}``: the lease's new end (broker clock, epoch seconds)."""
    queue = await queue_of(request)
    data = await body_of(request, frozenset({"receipt", "seconds"}))
    receipt = text(data, "receipt", required=True) or ""
    span = number(data, "seconds")
    if span is None:
        raise InvalidArgument("seconds is required: how long from now the lease lasts")
    [until] = await queue.extend_many([receipt], span)
    if until is None:
        raise LeaseLost(f"receipt {receipt}: it no longer holds its message's lease")
    return ok({"lease_until": until})


async def peek(request: Request) -> Response:
    """Live messages in delivery order, at most ``limit`` (a read: nothing is leased)."""
    queue = await queue_of(request)
    limit = query_int(request, "limit", 10, 1, MAX_PEEK)
    found = await queue.peek(limit)
    return ok({"messages": [record(m) for m in found]})


async def show_message(request: Request) -> Response:
    """One message: state, attempts, and the error of each."""
    queue = await queue_of(request)
    message_id = name_param(request, "message_id")
    found = await queue.get_message(message_id)
    if found is None:
        raise QueueNotFound(f"queue {queue.name!r} holds no message {message_id!r}")
    shown = record(found)
    shown["errors"] = errors_json(found.errors)
    shown["last_error"] = found.last_error
    return ok(shown)


async def delete_message(request: Request) -> Response:
    queue = await queue_of(request)
    message_id = name_param(request, "message_id")
    if not await queue.delete_message(message_id):
        raise QueueNotFound(f"queue {queue.name!r} holds no message {message_id!r}")
    return ok({"deleted": True})


async def cancel_message(request: Request) -> Response:
    """Rule 40: ``{"id", "cancelled": "waiting" | "running"}``; 404 (nothing changed) for
    an acked, dead or unknown message."""
    queue = await queue_of(request)
    message_id = name_param(request, "message_id")
    found = await queue.cancel(message_id)
    return ok({"id": message_id, "cancelled": found})
