"""``GET /api/levels``: queue levels over time, as recorded every 10 s by the running
workers and ``hailq serve`` (hailq/backends/levels.py); the dashboard's charts load it
when a page opens and append live points after."""

from __future__ import annotations

import re

from starlette.requests import Request
from starlette.responses import Response

from hailq.backends.base import KEEP
from hailq.errors import InvalidArgument
from hailq.serve.api_io import blocking, broker_of, ok
from hailq.serve.pages_data import levels_json
from hailq.settings import check_name

DEFAULT_SECONDS = 3600
MAX_SECONDS = int(KEEP)


async def levels(request: Request) -> Response:
    """``?seconds=N`` (default an hour) back from now, ``?queue=NAME`` for one queue's
    series (without: the totals and each queue's ready counts)."""
    broker = broker_of(request)
    queue = request.query_params.get("queue")
    if queue is not None:  # an empty ?queue= names no queue: 400, as any bad name
        check_name(queue)
    seconds = seconds_param(request.query_params.get("seconds"))
    return ok(await blocking(lambda: levels_json(broker, queue, seconds)))


def seconds_param(raw: str | None) -> float:
    if raw is None or raw == "":
        return float(DEFAULT_SECONDS)
    # ASCII digits only: int() would also take other scripts' digits and signs.
    if not re.fullmatch(r"[0-9]{1,5}", raw) or not 1 <= int(raw) <= MAX_SECONDS:
        raise InvalidArgument(f"seconds must be a whole number from 1 to {MAX_SECONDS}, "
                              f"got {raw!r}")
    return float(raw)
