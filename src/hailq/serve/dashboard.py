"""The dashboard of ``hailq serve``: server-rendered pages at ``/`` (rules 25, 29, 32).

``routes()`` is mounted by ``hailq.serve.app.create_app`` behind its security
middleware, which has already checked the token (``request.state.role``), the Host
and the Origin. Pages only read; their buttons call the JSON API (``/api/...``) from
``static/dashboard.js`` with the session cookie, so every change goes through the
API's checks. Only the ``admin`` role sees buttons. Jinja2 escapes everything a page
shows (bodies, headers, errors, names), and payloads can be hidden: the "payloads"
toggle keeps a cookie, and with it the server leaves bodies and headers out of the
page altogether.
"""

from __future__ import annotations

import datetime
import math
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from hailq._time import format_age
from hailq.broker import Broker
from hailq.errors import InvalidArgument, QueueNotFound, TopicNotFound
from hailq.history import OUTCOMES
from hailq.serve import failures
from hailq.serve import pages_data as data
from hailq.serve.api_history import FILTERS, history_query, history_row
from hailq.serve.api_io import blocking

HERE = Path(__file__).parent
HIDE_COOKIE = "hailq_payloads"  # "hidden": pages leave bodies and headers out
REFRESH_SECONDS = 3  # how often the overview polls while its tab is visible
OLDER_THAN = (("", "any time"), ("60", "1 minute"), ("600", "10 minutes"),
              ("3600", "1 hour"), ("86400", "1 day"), ("604800", "7 days"))

_env = Environment(loader=FileSystemLoader(HERE / "templates"),
                   autoescape=select_autoescape(default=True, default_for_string=True),
                   trim_blocks=True, lstrip_blocks=True)


def routes() -> list[BaseRoute]:
    """The dashboard's routes, mounted at ``/`` by ``create_app``."""
    return [
        Route("/", overview, methods=["GET"]),
        Route("/overview.json", overview_data, methods=["GET"]),
        Route("/queues/{queue}", queue_page, methods=["GET"]),
        Route("/queues/{queue}/dead", dead_page, methods=["GET"]),
        Route("/queues/{queue}/message", message_page, methods=["GET"]),
        Route("/topics", topics_page, methods=["GET"]),
        Route("/workers", workers_page, methods=["GET"]),
        Route("/autoscalers", autoscalers_page, methods=["GET"]),
        Route("/schedules", schedules_page, methods=["GET"]),
        Route("/history", history_page, methods=["GET"]),
        Route("/favicon.ico", favicon, methods=["GET"]),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]


# -- formatting, for templates ---------------------------------------------------------

def age(seconds: float | None) -> str:
    """A duration as an operator reads it: 850ms, 12s, 4m 05s, 3h 20m, 2d 4h."""
    return format_age(seconds, spaced=True)


def count(n: int, capped: bool = False) -> str:
    return f"{n:,}+" if capped else f"{n:,}"


def rate(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.1f}/s" if value < 100 else f"{value:,.0f}/s"


def stamp(at: float | None) -> str:
    if at is None:
        return "-"
    moment = datetime.datetime.fromtimestamp(at, datetime.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def ago(at: float | None, now: float) -> str:
    """When ``at`` was (or will be) as seen from ``now``: "12s ago", "in 4m 05s", "now"."""
    if at is None:
        return "-"
    delta = now - at
    if abs(delta) < 0.5:
        return "now"
    return f"{age(delta)} ago" if delta > 0 else f"in {age(-delta)}"


def percent(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.2f}%"


_env.filters.update(age=age, count=count, rate=rate, stamp=stamp, percent=percent, ago=ago)
failures.register(_env)


# -- rendering -------------------------------------------------------------------------

def _broker(request: Request) -> Broker:
    broker: Broker = request.app.state.broker
    return broker


def _render(request: Request, template: str, status: int = 200, **context: Any) -> Response:
    role = getattr(request.state, "role", "read")
    hidden = (request.cookies.get(HIDE_COOKIE) == "hidden"
              or bool(getattr(request.app.state, "hide_payloads", False)))
    page = _env.get_template(template).render(
        role=role, admin=role == "admin", payloads_hidden=hidden, path=request.url.path,
        refresh=REFRESH_SECONDS, **context)
    return HTMLResponse(page, status_code=status, headers={
        "Cache-Control": "no-store",
        # Only our own script and style; no inline script runs, nothing is fetched
        # from elsewhere (a stored payload that slipped through escaping stays inert).
        "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
                                   "style-src 'self'; script-src 'self'; "
                                   "frame-ancestors 'none'; base-uri 'none'; "
                                   "form-action 'self'",
        "X-Content-Type-Options": "nosniff", "Referrer-Policy": "same-origin"})


def _error(request: Request, status: int, message: str) -> Response:
    return _render(request, "error.html", status=status, title="Not found"
                   if status == 404 else "Error", message=message)


def _limit(request: Request) -> int:
    raw = request.query_params.get("limit", "")
    if not raw:
        return data.DEFAULT_ROWS
    if not (raw.isascii() and raw.isdigit() and len(raw) < 10) \
            or not 1 <= int(raw) <= data.MAX_ROWS:  # not "²", which isdigit() takes
        raise InvalidArgument(f"limit must be a whole number from 1 to {data.MAX_ROWS}")
    return int(raw)


# -- pages -----------------------------------------------------------------------------

async def overview(request: Request) -> Response:
    """Every queue at a glance, with live charts of depth and throughput."""
    found = await blocking(lambda: data.overview_json(_broker(request)))
    return _render(request, "overview.html", title="Queues", overview=found,
                   limit=data.COUNT_LIMIT)


async def overview_data(request: Request) -> Response:
    """What the overview's script polls: ``overview_json``."""
    found = await blocking(lambda: data.overview_json(_broker(request)))
    return JSONResponse(found, headers={"Cache-Control": "no-store"})


async def queue_page(request: Request) -> Response:
    name = request.path_params["queue"]
    try:
        limit = _limit(request)
        page = await blocking(lambda: data.queue_page(_broker(request).get_queue(name), limit))
    except QueueNotFound as exc:
        return _error(request, 404, str(exc))
    except InvalidArgument as exc:
        return _error(request, 400, str(exc))
    return _render(request, "queue.html", title=name, page=page, f=page.figures,
                   s=page.figures.stats)


def dead_filter(request: Request) -> data.DeadFilter:
    """The page's filter from its query: ``error`` (text in any attempt's error),
    ``older_than`` (seconds since it died) and ``ordering_key``."""
    error = request.query_params.get("error", "").strip() or None
    key = request.query_params.get("ordering_key", "").strip() or None
    raw = request.query_params.get("older_than", "").strip()
    older_than = None
    if raw:
        try:
            older_than = float(raw)
        except ValueError:
            raise InvalidArgument("older_than must be a number of seconds") from None
        if not math.isfinite(older_than) or older_than < 0:
            raise InvalidArgument("older_than must be a number of seconds, 0 or more")
    return data.DeadFilter(error, older_than, key)


async def dead_page(request: Request) -> Response:
    name = request.path_params["queue"]
    try:
        chosen = dead_filter(request)
        limit = _limit(request)
        page = await blocking(lambda: data.dead_page(_broker(request), name, chosen, limit))
        groups = await blocking(lambda: failures.dead_groups(
            _broker(request), name, chosen.error, chosen.older_than, chosen.ordering_key))
    except QueueNotFound as exc:
        return _error(request, 404, str(exc))
    except InvalidArgument as exc:
        return _error(request, 400, str(exc))
    return _render(request, "dead.html", title=f"{name}: dead letters", page=page,
                   groups=groups,
                   older_than_choices=OLDER_THAN,
                   older_than=request.query_params.get("older_than", ""))


async def message_page(request: Request) -> Response:
    """One message by id (``?id=``): state, attempts and the error of each."""
    name = request.path_params["queue"]
    message_id = request.query_params.get("id", "").strip()
    broker = _broker(request)
    try:
        found, now = await blocking(lambda: (
            data.message_details(broker.get_queue(name), message_id), broker.now()))
    except QueueNotFound as exc:
        return _error(request, 404, str(exc))
    except InvalidArgument as exc:
        return _error(request, 400, str(exc))
    if found is None:
        return _error(request, 404, f"queue {name!r} holds no message {message_id!r} "
                                    "(acked, deleted, or never sent)")
    return _render(request, "message.html", title=f"{name}: {message_id}", queue=name,
                   m=found, now=now)


async def topics_page(request: Request) -> Response:
    try:
        found = await blocking(lambda: data.topics(_broker(request)))
    except TopicNotFound as exc:  # deleted while we looked
        return _error(request, 404, str(exc))
    return _render(request, "topics.html", title="Topics", topics=found)


async def workers_page(request: Request) -> Response:
    now, found = await blocking(lambda: data.workers(_broker(request)))
    return _render(request, "workers.html", title="Workers", workers=found, now=now)


async def autoscalers_page(request: Request) -> Response:
    latest, recent = await blocking(lambda: data.autoscalers(_broker(request)))
    return _render(request, "autoscalers.html", title="Autoscalers", latest=latest,
                   recent=recent)


async def schedules_page(request: Request) -> Response:
    """Periodic schedules (rule 35): timing, next and last slot, messages sent; admins
    pause and resume them (``POST /api/schedules/pause``, ``/resume``)."""
    now, found = await blocking(lambda: data.schedules(_broker(request)))
    return _render(request, "schedules.html", title="Schedules", schedules=found, now=now)


async def history_page(request: Request) -> Response:
    """Finished messages (rule 40) with the filters of ``GET /api/history``."""
    broker = _broker(request)

    def read() -> tuple[float, list[Any]]:
        now = broker.now()
        query = history_query(request.query_params, now, limit=_limit(request))
        return now, [history_row(e) for e in broker.backend.history_search(query)]

    try:
        now, found = await blocking(read)
    except InvalidArgument as exc:
        return _error(request, 400, str(exc))
    chosen = {name: request.query_params.get(name, "") for name in FILTERS}
    return _render(request, "history.html", title="History", rows=found, now=now,
                   chosen=chosen, active=any(chosen.values()), outcomes=OUTCOMES)


async def favicon(request: Request) -> Response:
    return FileResponse(HERE / "static" / "favicon.ico", media_type="image/x-icon",
                        headers={"Cache-Control": "max-age=86400"})
