"""Routes on queues as a whole: list, show, declare, configure, pause, resume, delete,
purge, and the figures autoscalers read (rules 25 and 32)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from hailq.errors import InvalidArgument, QueueNotFound
from hailq.observe.figures import QueueFigures
from hailq.observe.prometheus import collect_figures, desired_workers_of
from hailq.queue import Queue
from hailq.serve.api_io import (
    SETTING_NAMES,
    blocking,
    body_of,
    broker_of,
    flag,
    name_param,
    ok,
    query_flag,
    queue_of,
    settings_of,
)

_FIGURES = ("ready", "scheduled", "in_flight", "blocked", "dead", "oldest_ready_age", "sent",
            "acked", "nacked", "redelivered", "dead_lettered", "late_acks")


def queue_json(queue: Queue, figures: QueueFigures, *, detail: bool = False) -> dict[str, Any]:
    """A queue as the API shows it: settings (and which are an operator's), figures."""
    s = figures.stats
    shown: dict[str, Any] = {name: getattr(s, name) for name in _FIGURES}
    shown.update(delayed=s.delayed, backlog=s.backlog, rates=asdict(figures.rates),
                 breaches=sum(p.breaches for p in figures.priorities),
                 workers=figures.workers, desired_workers=figures.desired_workers)
    found: dict[str, Any] = {
        "name": queue.name, "paused": s.paused, "settings": settings_json(queue),
        "overridden": sorted(queue.overrides), "figures": shown}
    if detail:
        found["overrides"] = dict(queue.overrides)
        found["parked_keys"] = list(s.parked_keys)
        found["priorities"] = [asdict(p) for p in figures.priorities]
    return found


def settings_json(queue: Queue) -> dict[str, Any]:
    data = asdict(queue.settings)
    if data.get("slo"):
        data["slo"] = {str(k): v for k, v in data["slo"].items()}
    return data


async def _show(request: Request, queue: Queue) -> Response:
    figures = await blocking(queue.figures)
    return ok(queue_json(queue, figures, detail=True))


async def list_queues(request: Request) -> Response:
    broker = broker_of(request)

    def read() -> list[dict[str, Any]]:
        return [queue_json(q, q.figures()) for q in broker.queues()]

    return ok({"queues": await blocking(read)})


async def show_queue(request: Request) -> Response:
    return await _show(request, await queue_of(request))


async def declare_queue(request: Request) -> Response:
    broker = broker_of(request)
    name = name_param(request, "queue")
    settings = settings_of(await body_of(request, SETTING_NAMES))
    queue = await blocking(lambda: broker.queue(name, **settings))
    return await _show(request, queue)


async def configure_queue(request: Request) -> Response:
    """An operator's override (``{"lease": 30}``), or ``{"reset": true}`` to clear them."""
    broker = broker_of(request)
    name = name_param(request, "queue")
    data = await body_of(request, SETTING_NAMES | {"reset"})
    reset = flag(data, "reset")
    settings = settings_of({k: v for k, v in data.items() if k != "reset"})
    queue = await blocking(lambda: broker.configure(name, reset=reset, **settings))
    return await _show(request, queue)


async def delete_queue(request: Request) -> Response:
    broker = broker_of(request)
    name = name_param(request, "queue")
    force = query_flag(request, "force")
    deleted = await blocking(lambda: _delete(broker, name, force))
    return ok({"deleted": True, "messages_deleted": deleted})


def _delete(broker: Any, name: str, force: bool) -> int:
    broker.get_queue(name)  # 404 for a queue that never was, not a silent success
    result: int = broker.delete_queue(name, force=force)
    return result


async def pause_queue(request: Request) -> Response:
    queue = await queue_of(request)
    await body_of(request, frozenset())
    await blocking(queue.pause)
    return ok({"paused": True})


async def resume_queue(request: Request) -> Response:
    queue = await queue_of(request)
    await body_of(request, frozenset())
    await blocking(queue.resume)
    return ok({"paused": False})


async def purge_queue(request: Request) -> Response:
    """Every live message (``{"dead": true}``: the dead letters instead)."""
    queue = await queue_of(request)
    dead = flag(await body_of(request, frozenset({"dead"})), "dead")
    return ok({"purged": await blocking(lambda: queue.purge(dead=dead))})


async def desired(request: Request) -> Response:
    """As the exporter's ``/desired_workers``: every queue, or ``?queue=NAME``'s."""
    broker = broker_of(request)
    found = await blocking(lambda: collect_figures(broker))
    wanted = request.query_params.get("queue")
    if wanted == "":
        raise InvalidArgument("queue must name a queue (leave it out for every queue)")
    doc = desired_workers_of(found, wanted)
    if doc is None:
        raise QueueNotFound(f"no queue named {wanted!r}")
    return ok(doc)
