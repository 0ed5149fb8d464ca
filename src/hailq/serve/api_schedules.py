"""Pause and resume a periodic schedule (rule 35) by name: ``POST /api/schedules/pause``
and ``/resume`` with ``{"name": ...}`` (a schedule's name may hold spaces and slashes,
so it travels in the body, not the path). Admin only, like every change."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from hailq.errors import InvalidArgument, ScheduleNotFound
from hailq.serve.api_io import blocking, body_of, broker_of, ok, text

_FIELDS = frozenset({"name"})


async def pause_schedule(request: Request) -> Response:
    broker = broker_of(request)
    name = await _name(request)
    await blocking(lambda: broker.pause_schedule(name))
    return ok({"name": name, "paused": True})


async def resume_schedule(request: Request) -> Response:
    broker = broker_of(request)
    name = await _name(request)
    await blocking(lambda: broker.resume_schedule(name))
    return ok({"name": name, "paused": False})


async def _name(request: Request) -> str:
    name = text(await body_of(request, _FIELDS), "name", required=True)
    if name is None or not 1 <= len(name) <= 200:
        raise InvalidArgument("name must be a schedule's name, 1-200 characters")
    if not name.isprintable():  # no schedule has one (Schedule checks); no database asked
        raise ScheduleNotFound(f"no schedule named {name!r}")
    return name
