"""``create_app``: the ASGI application of ``hailq serve``.

The security middleware comes first (rule 29), then the API under ``/api``,
``/healthz``, ``/metrics``, ``/openapi.json`` and ``/login``, then the dashboard's
pages at ``/`` when ``hailq.serve.dashboard`` is installed.
"""

from __future__ import annotations

import importlib
import importlib.util
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from hailq.broker import Broker
from hailq.observe.prometheus import CONTENT_TYPE, collect_figures, exposition
from hailq.serve import api
from hailq.serve.api_io import blocking
from hailq.serve.errors import error_response, handlers
from hailq.serve.polls import Polls
from hailq.serve.protocol import DEFAULT_READ_TIMEOUT
from hailq.serve.schemas import Doc, openapi
from hailq.serve.security import COOKIE, Policy, SecurityMiddleware, Tokens, check_tokens

DEFAULT_MAX_BODY = 2 * 1024 * 1024  # a 1 MiB message as base64, with room for its fields
DEFAULT_MAX_WAIT = 60.0
_DASHBOARD = "hailq.serve.dashboard"


def create_app(broker: Broker, *, tokens: Tokens, host: str = "127.0.0.1",
               allow_hosts: tuple[str, ...] = (), max_body: int = DEFAULT_MAX_BODY,
               max_wait: float = DEFAULT_MAX_WAIT,
               read_timeout: float = DEFAULT_READ_TIMEOUT) -> Starlette:
    """The app serving ``broker``. ``tokens`` are the accepted tokens by role; ``host``
    is the bound address (a ``Host`` header naming it, localhost, 127.0.0.1 or [::1] is
    accepted, and the names in ``allow_hosts``; ``"*"`` accepts any, for a server behind
    a proxy that checks it); bodies over ``max_body`` bytes get 413 unread, bodies not
    all there within ``read_timeout`` seconds 408; a receive waits at most ``max_wait``
    seconds. Where ``host`` is not loopback, every token must have at least 16
    characters (InvalidArgument otherwise). Wait and handler time of messages received and
    settled through it are counted by the broker (rule 36); ``close_app`` (or the app's
    lifespan) writes the last of them."""
    check_tokens(tokens, host)
    policy = Policy(tokens, host, allow_hosts, max_body, read_timeout)
    app = Starlette(
        routes=[*_own_routes(), *api.routes(), *_dashboard_routes()],
        middleware=[Middleware(SecurityMiddleware, policy=policy)],
        exception_handlers=handlers(),  # type: ignore[arg-type]
        lifespan=_closing(broker),
    )
    app.state.broker = broker
    app.state.polls = Polls(broker)
    app.state.policy = policy
    app.state.max_wait = max_wait
    app.state.scrape_lock = threading.Lock()
    return app


def close_app(app: Starlette) -> None:
    """Stop the long polls' waiters and write the figures still held in memory."""
    polls: Polls = app.state.polls
    polls.close()
    broker: Broker = app.state.broker
    if broker.figures is not None:
        broker.figures.flush()


def _closing(broker: Broker) -> Callable[[Starlette], AbstractAsyncContextManager[None]]:
    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            if broker.figures is not None:
                await blocking(broker.figures.flush)

    return lifespan


OWN_DOCS: list[tuple[str, str, Doc]] = [
    ("GET", "/healthz", Doc("The server is up", None, response="Health", statuses=())),
    ("GET", "/metrics", Doc("Every queue's figures in Prometheus' text format", "read",
                            content_type=CONTENT_TYPE, statuses=(503,))),
    ("GET", "/openapi.json", Doc("This document", "read", response="Done", statuses=())),
]


def _own_routes() -> list[BaseRoute]:
    return [Route("/healthz", healthz, methods=["GET"]),
            Route("/metrics", metrics, methods=["GET"]),
            Route("/openapi.json", openapi_document, methods=["GET"]),
            Route("/login", login, methods=["GET"], include_in_schema=False)]


def _dashboard_routes() -> list[BaseRoute]:
    """The dashboard's pages if that part is installed, else a small index at ``/``."""
    if importlib.util.find_spec(_DASHBOARD) is None:
        return [Route("/", index, methods=["GET"])]
    routes: list[BaseRoute] = importlib.import_module(_DASHBOARD).routes()
    return routes


async def healthz(request: Request) -> Response:
    return JSONResponse({"ok": True})


async def metrics(request: Request) -> Response:
    """The figures of ``hailq metrics`` (the same source and exposition), per scrape."""
    broker: Broker = request.app.state.broker
    lock: threading.Lock = request.app.state.scrape_lock

    def scrape() -> bytes:
        with lock:  # one look at the database at a time, however many scrapers come
            return exposition(collect_figures(broker))

    return Response(await blocking(scrape), media_type=CONTENT_TYPE)


async def openapi_document(request: Request) -> Response:
    return JSONResponse(document(request.app.state.max_wait))


def document(max_wait: float = DEFAULT_MAX_WAIT) -> dict[str, Any]:
    """The OpenAPI document of every route."""
    listed = [*OWN_DOCS, *((m, p, d) for m, p, _, d in api.OPERATIONS)]
    return openapi(listed, max_wait)


async def login(request: Request) -> Response:
    """``/login?token=T``: keep T in an HttpOnly, SameSite=Strict cookie and go to ``/``."""
    policy: Policy = request.app.state.policy
    token = request.query_params.get("token", "")
    if not token or policy.tokens.role_of(token) is None:
        return error_response(401, "unauthorized", "that token is not valid")
    response = RedirectResponse("/", status_code=303)
    response.set_cookie(COOKIE, token, httponly=True, samesite="strict", path="/",
                        secure=request.url.scheme == "https")
    return response


async def index(request: Request) -> Response:
    return JSONResponse({"name": "hailq", "api": "/api/queues", "openapi": "/openapi.json",
                         "role": request.state.role})
