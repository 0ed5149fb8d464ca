"""Dead letters (rule 14): list with filters, and redrive or delete in bulk on the
server, on everything the filter matches up to ``limit``, not only a page of rows."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from hailq.errors import InvalidArgument
from hailq.models import DeadMessage
from hailq.queue import Queue
from hailq.serve import failures
from hailq.serve.api_io import (
    blocking,
    body_of,
    broker_of,
    errors_json,
    integer,
    number,
    ok,
    query_int,
    query_seconds,
    queue_of,
    record,
    text,
)

COUNT_CAP = 1000  # past this a filtered count says "at least" (count_exact false)
BULK_CAP = 100_000
_CHUNK = 1000
_FILTER = frozenset({"ids", "error", "older_than", "ordering_key", "limit"})


def dead_json(m: DeadMessage) -> dict[str, Any]:
    shown = record(m)
    shown["errors"] = errors_json(m.errors)
    shown["last_error"] = m.last_error
    return shown


async def list_dead(request: Request) -> Response:
    """``{"count", "count_exact", "messages"}``; filters ``error`` (text in any attempt's
    error), ``older_than`` (seconds dead), ``ordering_key``; ``limit`` rows."""
    queue = await queue_of(request)
    error = request.query_params.get("error") or None
    older_than = query_seconds(request, "older_than")
    key = request.query_params.get("ordering_key") or None
    limit = query_int(request, "limit", 100, 1, COUNT_CAP)
    filtered = error is not None or older_than is not None or key is not None

    def read() -> dict[str, Any]:
        if filtered:
            rows = queue.dead_letters(error_contains=error, older_than=older_than,
                                      ordering_key=key, limit=COUNT_CAP + 1)
            count, exact = min(len(rows), COUNT_CAP), len(rows) <= COUNT_CAP
        else:
            rows = queue.dead_letters(limit=limit)
            count, exact = queue.stats().dead, True
        return {"count": count, "count_exact": exact,
                "messages": [dead_json(m) for m in rows[:limit]]}

    return ok(await blocking(read))


async def dead_groups(request: Request) -> Response:
    """``{"groups", "scanned", "more"}``: the dead letters that match the filters (as
    ``list_dead`` takes them), by the signature of their last error, the largest group
    first; ``scanned`` of them were read, ``more`` says others match beyond."""
    name = (await queue_of(request)).name
    error = request.query_params.get("error") or None
    older_than = query_seconds(request, "older_than")
    key = request.query_params.get("ordering_key") or None
    found = await blocking(lambda: failures.dead_groups(broker_of(request), name, error,
                                                        older_than, key))
    return ok({"groups": [failures.group_json(g) for g in found.groups],
               "scanned": found.scanned, "more": found.more})


async def _chosen(request: Request, queue: Queue) -> tuple[list[str], bool]:
    """The ids a bulk action applies to, and whether they were given (and may name
    messages that are not dead): ``ids``, or the dead letters matching the filter,
    oldest death first, at most ``limit`` (default 1000)."""
    data = await body_of(request, _FILTER)
    if "ids" in data:
        if set(data) - {"ids"}:
            raise InvalidArgument("give ids, or a filter (error, older_than, ordering_key, "
                                  "limit), not both")
        ids = data["ids"]
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids) \
                or len(ids) > BULK_CAP:
            raise InvalidArgument(f"ids must be a list of at most {BULK_CAP} message ids")
        return list(dict.fromkeys(ids)), True
    error = text(data, "error")
    older_than = number(data, "older_than")
    key = text(data, "ordering_key")
    limit = integer(data, "limit", 1000, 1, BULK_CAP)
    found = await blocking(lambda: queue.dead_letters(
        error_contains=error, older_than=older_than, ordering_key=key, limit=limit))
    return [m.id for m in found], False


async def redrive(request: Request) -> Response:
    """Back to ready with attempt 0, in key order: ``{"redriven": n}``."""
    queue = await queue_of(request)
    ids, _ = await _chosen(request, queue)

    def run() -> int:  # redrive itself leaves alone what is not dead
        return sum(queue.redrive(ids[i:i + _CHUNK]) for i in range(0, len(ids), _CHUNK))

    return ok({"redriven": await blocking(run) if ids else 0})


async def delete(request: Request) -> Response:
    """Delete the chosen dead letters for good: ``{"deleted": n}``."""
    queue = await queue_of(request)
    ids, given = await _chosen(request, queue)

    def dead(message_id: str) -> bool:
        found = queue.get_message(message_id)
        return found is not None and found.state == "dead"

    def run() -> int:
        return sum(1 for i in ids if (not given or dead(i)) and queue.delete_message(i))

    return ok({"deleted": await blocking(run) if ids else 0})
