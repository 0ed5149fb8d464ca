"""JSON in and out for the API routes: reading a request's fields with clear errors,
writing hailq's objects as JSON (bytes as base64), and running the broker's blocking
calls off the event loop."""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Callable
from dataclasses import asdict
from typing import Any, TypeVar

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse

from hailq.broker import Broker
from hailq.checks import Envelope
from hailq.errors import InvalidArgument
from hailq.models import AttemptError
from hailq.queue import Queue
from hailq.serve.errors import ApiError
from hailq.settings import QueueSettings

T = TypeVar("T")
MESSAGE_FIELDS = frozenset({"body", "body_base64", "priority", "ordering_key", "delay",
                            "headers", "dedup_id"})
SETTING_NAMES = frozenset(QueueSettings.__dataclass_fields__)
INTEGER_SETTINGS = frozenset({"max_attempts", "max_message_size", "max_in_flight", "burst"})
MAX_NUMBER = 2**53  # past this an integer is no exact float: no field takes one
_DIGITS = re.compile(r"[0-9]{1,9}")
_DECIMAL = re.compile(r"[0-9]{1,12}(\.[0-9]{0,9})?|\.[0-9]{1,9}")


async def blocking(call: Callable[[], T]) -> T:
    """Run a blocking broker call in the thread pool: the event loop stays free."""
    return await anyio.to_thread.run_sync(call)


def broker_of(request: Request) -> Broker:
    broker: Broker = request.app.state.broker
    return broker


def name_param(request: Request, key: str) -> str:
    value: str = request.path_params[key]
    return value


async def body_of(request: Request, allowed: frozenset[str] | None = None) -> dict[str, Any]:
    """The JSON object of the request body (``{}`` when empty); 400 if it is not one or
    names a field not in ``allowed``."""
    raw = await request.body()
    if not raw:  # no body at all; whitespace is no JSON and is refused below
        return {}
    try:
        data = json.loads(raw, parse_constant=_no_constant, parse_float=_finite)
    except _Unrepresentable as exc:
        raise ApiError(400, "invalid_json", str(exc)) from None
    except (ValueError, RecursionError):
        raise ApiError(400, "invalid_json", "the request body is not valid JSON") from None
    if not isinstance(data, dict):
        raise ApiError(400, "invalid_json", "the request body must be a JSON object")
    if allowed is not None:
        unknown = sorted(set(data) - allowed)
        if unknown:
            raise InvalidArgument(f"unknown field(s) {', '.join(map(repr, unknown))}; allowed: "
                                  f"{', '.join(sorted(allowed))}")
    return data


class _Unrepresentable(ValueError):
    """A JSON number no double holds (1e400), or NaN/Infinity, which JSON has not."""


def _no_constant(name: str) -> float:
    raise _Unrepresentable(f"the request body is not valid JSON: {name} is no JSON number")


def _finite(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise _Unrepresentable(f"the request body holds the number {shown(literal)}, "
                               "too large for any field")
    return value


def shown(value: object, most: int = 40) -> str:
    """``repr(value)``, cut short: a 400-digit number is not echoed whole."""
    text = repr(value)
    return text if len(text) <= most else f"{text[:most]}... ({len(text)} characters)"


def sane(value: Any, key: str) -> Any:
    """``value`` (of the field ``key``), refused with 400 if it holds an integer no
    setting or duration could be (beyond 2**53): such a number overflows a float."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_NUMBER:
        raise InvalidArgument(f"{key} is out of range, got {shown(value)}")
    if isinstance(value, dict):
        for k, v in value.items():
            sane(v, f"{key}.{k}")
    elif isinstance(value, list):
        for v in value:
            sane(v, key)
    return value


def number(data: dict[str, Any], key: str, default: float | None = None) -> float | None:
    value = data.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidArgument(f"{key} must be a number of seconds, got {shown(value)}")
    return float(sane(value, key))


def whole(value: Any) -> Any:
    """JSON's 5.0 is the integer 5 (JSON Schema agrees); anything else as it is."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def settings_of(data: dict[str, Any]) -> dict[str, Any]:
    """Queue settings of a request, integers written as 5.0 read as 5."""
    return {k: whole(sane(v, k)) if k in INTEGER_SETTINGS else sane(v, k)
            for k, v in data.items()}


def integer(data: dict[str, Any], key: str, default: int, low: int, high: int) -> int:
    value = whole(data.get(key, default))
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidArgument(f"{key} must be an integer from {low} to {high}, "
                              f"got {shown(value)}")
    return value


def text(data: dict[str, Any], key: str, *, required: bool = False) -> str | None:
    value = data.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise InvalidArgument(f"{key} must be a string, got {value!r}")
    return value


def flag(data: dict[str, Any], key: str) -> bool:
    value = data.get(key, False)
    if not isinstance(value, bool):
        raise InvalidArgument(f"{key} must be true or false, got {value!r}")
    return value


def query_flag(request: Request, key: str) -> bool:
    value = request.query_params.get(key, "false")
    if value not in ("true", "false"):
        raise InvalidArgument(f"{key} must be true or false, got {value!r}")
    return value == "true"


def query_int(request: Request, key: str, default: int, low: int, high: int) -> int:
    value = request.query_params.get(key)
    if value is None or value == "":
        return default
    # ASCII digits only: str.isdigit() also says yes to "²", which int() refuses.
    if not _DIGITS.fullmatch(value) or not low <= int(value) <= high:
        raise InvalidArgument(f"{key} must be an integer from {low} to {high}, "
                              f"got {shown(value)}")
    return int(value)


def query_seconds(request: Request, key: str) -> float | None:
    value = request.query_params.get(key)
    if value is None or value == "":
        return None
    try:  # float() reads other scripts' digits and "nan" too: ASCII decimals only
        seconds = float(value) if _DECIMAL.fullmatch(value) else math.nan
    except ValueError:
        seconds = math.nan
    if not 0 <= seconds <= 10 * 366 * 86400:  # NaN and infinity fail this too
        raise InvalidArgument(f"{key} must be a number of seconds from 0 to "
                              f"{10 * 366 * 86400}, got {shown(value)}")
    return seconds


def envelope(item: object) -> Envelope:
    """One outgoing message of a request: its body (JSON ``body`` or ``body_base64``)
    and send options; InvalidArgument for anything else."""
    if not isinstance(item, dict):
        raise InvalidArgument("a message must be a JSON object with body or body_base64")
    unknown = sorted(set(item) - MESSAGE_FIELDS)
    if unknown:
        raise InvalidArgument(f"unknown message field(s) {', '.join(map(repr, unknown))}; "
                              f"allowed: {', '.join(sorted(MESSAGE_FIELDS))}")
    if ("body" in item) == ("body_base64" in item):
        raise InvalidArgument("give a message either body (any JSON value) or body_base64 "
                              "(bytes as base64), not both or neither")
    body: Any = item.get("body")
    if "body_base64" in item:
        encoded = item["body_base64"]
        if not isinstance(encoded, str):
            raise InvalidArgument("body_base64 must be a string of base64")
        try:
            body = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise InvalidArgument("body_base64 is not valid base64") from None
    headers = item.get("headers")
    if headers is not None and not isinstance(headers, dict):
        raise InvalidArgument("headers must be an object of string values")
    return Envelope(body, priority=whole(sane(item.get("priority", 0), "priority")),
                    ordering_key=item.get("ordering_key"), delay=_delay(item),
                    headers=headers, dedup_id=item.get("dedup_id"))


def _delay(item: dict[str, Any]) -> float:
    value = number(item, "delay", 0.0)
    return 0.0 if value is None else value


def envelopes(data: dict[str, Any]) -> list[Envelope]:
    """One message object, or ``{"messages": [...]}``."""
    if "messages" not in data:
        return [envelope(data)]
    if set(data) != {"messages"}:
        raise InvalidArgument("a batch is {\"messages\": [...]} and nothing else")
    items = data["messages"]
    if not isinstance(items, list) or not items:
        raise InvalidArgument("messages must be a non-empty list of message objects")
    if len(items) > 1000:
        raise InvalidArgument("a batch holds at most 1000 messages")
    return [envelope(i) for i in items]


def body_json(body: Any) -> dict[str, Any]:
    """A stored body as JSON: ``{"body": value}`` or ``{"body_base64": ...}`` for bytes."""
    if isinstance(body, bytes | bytearray | memoryview):
        return {"body_base64": base64.b64encode(bytes(body)).decode("ascii")}
    return {"body": body}


def errors_json(errors: list[AttemptError]) -> list[dict[str, Any]]:
    return [asdict(e) for e in errors]


def record(obj: Any) -> dict[str, Any]:
    """A dataclass of hailq.models as JSON, its ``body`` as ``body_json`` does."""
    data = asdict(obj)
    if "body" in data:
        data.update(body_json(data.pop("body")))
    return data


def ok(data: Any, status: int = 200) -> JSONResponse:
    return JSONResponse(data, status_code=status)


async def queue_of(request: Request) -> Queue:
    """The path's queue; 404 (QueueNotFound) if it was never declared: a typo never
    creates a queue."""
    broker = broker_of(request)
    name = name_param(request, "queue")
    return await blocking(lambda: broker.get_queue(name))
