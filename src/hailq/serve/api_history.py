"""``GET /api/history``: finished messages of queues that keep history (rule 40), with
the filters ``hailq history`` and the dashboard's history page take."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from hailq.errors import InvalidArgument
from hailq.history import MAX_LIMIT, OUTCOMES, HistoryEntry, HistoryQuery, moment
from hailq.serve.api_io import blocking, broker_of, ok
from hailq.settings import check_name

FILTERS = ("queue", "id", "dedup_id", "header", "ordering_key", "outcome", "since", "until")


def history_query(params: Mapping[str, str], now: float, limit: int = 100) -> HistoryQuery:
    """The search a request's query parameters ask for (empty ones are no filter):
    ``header`` is NAME=VALUE, ``since`` and ``until`` a duration ago ("24h"), an ISO
    time or epoch seconds."""
    given = {name: params.get(name) or None for name in FILTERS}
    if given["queue"] is not None:
        check_name(given["queue"])
    if given["outcome"] is not None and given["outcome"] not in OUTCOMES:
        raise InvalidArgument(f"outcome must be one of {', '.join(OUTCOMES)}, "
                              f"got {given['outcome']!r}")
    header = None
    if given["header"] is not None:
        name, sep, value = given["header"].partition("=")
        if not sep or not name:
            raise InvalidArgument(f"header must be NAME=VALUE, got {given['header']!r}")
        header = (name, value)
    raw_limit = params.get("limit") or str(limit)
    if not raw_limit.isascii() or not raw_limit.isdigit():
        raise InvalidArgument(f"limit must be a whole number from 1 to {MAX_LIMIT}, "
                              f"got {raw_limit!r}")
    since, until = given["since"], given["until"]
    return HistoryQuery(
        queue=given["queue"], id=given["id"], dedup_id=given["dedup_id"], header=header,
        ordering_key=given["ordering_key"], outcome=given["outcome"],
        since=None if since is None else moment(since, now),
        until=None if until is None else moment(until, now), limit=int(raw_limit))


async def history(request: Request) -> Response:
    """``{"now", "messages"}``: the newest finished messages that match every filter."""
    broker = broker_of(request)

    def read() -> dict[str, Any]:
        now = broker.now()
        query = history_query(request.query_params, now)
        found = broker.backend.history_search(query)
        return {"now": now, "messages": [e.to_json() for e in found]}

    return ok(await blocking(read))


def history_row(e: HistoryEntry) -> dict[str, Any]:
    """One finished message as the dashboard's history page shows it."""
    body = e.body
    if body is None:
        shown = None
    elif isinstance(body, bytes):
        shown = "bytes:" + body.decode("utf-8", errors="backslashreplace")
    else:
        shown = json.dumps(body, ensure_ascii=False, indent=1)
    preview = None if shown is None else " ".join(shown.split())
    return {"id": e.id, "queue": e.queue, "outcome": e.outcome, "key": e.ordering_key,
            "dedup_id": e.dedup_id, "headers": e.headers, "priority": e.priority,
            "finished_at": e.finished_at, "enqueued_at": e.enqueued_at,
            "consumer": e.consumer, "handler_time": e.handler_time, "body": shown,
            "preview": None if preview is None else preview[:60],
            "cut": preview is not None and len(preview) > 60, "attempts": e.attempts}
