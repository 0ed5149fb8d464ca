"""Errors of the HTTP API: always ``{"error": {"code", "message"}}``, never a traceback.

Each ``HailqError`` maps to one status (400 bad input, 404 no such thing, 409 a
conflict, 413 too large, 503 storage away); anything else is logged and answered
500 with no details. Messages pass through ``scrub`` so a database password
never reaches a client, even from a driver's message.
"""

from __future__ import annotations

import logging
import re
import sqlite3

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from hailq.errors import (
    BackendUnavailable,
    HailqError,
    InvalidArgument,
    LeaseLost,
    MessageCancelled,
    MessageTooLarge,
    NotFound,
    QueueNotEmpty,
    StorageError,
    TopicHasSubscriptions,
)
from hailq.url import redact

log = logging.getLogger("hailq.serve")

# (exception class, status, code), most specific first.
_MAPPING: tuple[tuple[type[HailqError], int, str], ...] = (
    (MessageTooLarge, 413, "message_too_large"),
    (InvalidArgument, 400, "invalid_argument"),
    (NotFound, 404, "not_found"),  # queues, topics, subscriptions, schedules
    (QueueNotEmpty, 409, "queue_not_empty"),
    (TopicHasSubscriptions, 409, "topic_has_subscriptions"),
    (MessageCancelled, 409, "message_cancelled"),  # rule 40: a refused ack or nack
    (LeaseLost, 409, "lease_lost"),
    (StorageError, 503, "storage_unavailable"),
    (BackendUnavailable, 503, "storage_unavailable"),
)

_HTTP_CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
               405: "method_not_allowed", 409: "conflict", 413: "too_large",
               415: "unsupported_media_type", 503: "unavailable"}

_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S+")
# The library's hints name Python calls and CLI commands; over HTTP they name routes.
_NAMED = re.compile(r"no (queue|topic) named '([A-Za-z0-9_.:-]+)'")
_DECLARE = re.compile(r"declare it with broker\.(?:queue|topic)\(\)")
_LISTED = "'hailq topics' lists them"


class ApiError(Exception):
    """An error the API answers as it is: ``status``, ``code`` and a safe ``message``."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def scrub(text: str) -> str:
    """``text`` with the password of every URL in it replaced by ``***``."""
    return _URL.sub(lambda m: redact(m.group(0)), text)


def error_response(status: int, code: str, message: str,
                   headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": scrub(message)}}, status_code=status,
                        headers=headers)


def classify(exc: HailqError) -> tuple[int, str]:
    """The status and code of a hailq error."""
    for kind, status, code in _MAPPING:
        if isinstance(exc, kind):
            return status, code
    return 400, "refused"


async def on_hailq_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HailqError)
    status, code = classify(exc)
    if status == 503:
        log.warning("storage unavailable on %s %s: %s", request.method, request.url.path,
                    scrub(str(exc)))
    return error_response(status, code, http_hints(str(exc)) or type(exc).__name__)


def http_hints(message: str) -> str:
    """``message`` with its hints in the API's terms: the route that declares a queue
    or topic (an admin's), the one that lists subscriptions."""
    named = _NAMED.search(message)
    if named is not None:
        kind, name = named.groups()
        message = _DECLARE.sub(f"an admin declares it with PUT /api/{kind}s/{name}", message)
    return message.replace(_LISTED, "GET /api/topics lists them")


async def on_api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return error_response(exc.status, exc.code, exc.message)


async def on_http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return error_response(exc.status_code, _HTTP_CODES.get(exc.status_code, "error"),
                          exc.detail or "", dict(exc.headers or {}))


async def on_driver_error(request: Request, exc: Exception) -> Response:
    """A database driver's error that hailq did not wrap: the storage is away."""
    log.warning("database error on %s %s: %s: %s", request.method, request.url.path,
                type(exc).__name__, scrub(str(exc)))
    return error_response(503, "storage_unavailable",
                          "the database did not answer; try again later")


async def on_unexpected(request: Request, exc: Exception) -> Response:
    """The last resort: log it (with its traceback, in the server's log only) and say 500."""
    log.error("unexpected error on %s %s: %s", request.method, request.url.path,
              type(exc).__name__, exc_info=(type(exc), exc, exc.__traceback__))
    return error_response(500, "internal", "the server failed; its log says why")


def driver_errors() -> tuple[type[Exception], ...]:
    """The exception roots of the installed database drivers."""
    found: list[type[Exception]] = [sqlite3.Error]
    try:
        import psycopg

        found.append(psycopg.Error)
    except ImportError:  # PostgreSQL support not installed
        pass
    return tuple(found)


def handlers() -> dict[type[Exception] | int, object]:
    """The exception handlers of the app, for ``Starlette(exception_handlers=...)``."""
    found: dict[type[Exception] | int, object] = {
        HailqError: on_hailq_error, ApiError: on_api_error, HTTPException: on_http_error,
        Exception: on_unexpected}
    for kind in driver_errors():
        found[kind] = on_driver_error
    return found
