"""The JSON Schemas of the API's bodies, and the OpenAPI 3 document built from the
route table (``hailq.serve.api.OPERATIONS``), so the two never drift apart."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import hailq
from hailq.ids import RECEIPT_PATTERN

NAME = {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$"}
MESSAGE_ID = {"type": "string", "pattern": r"^[0-9A-HJKMNP-TV-Z]{26}$"}
RECEIPT = {"type": "string", "pattern": f"^{RECEIPT_PATTERN.pattern}$"}
TEXT = {"type": "string", "pattern": "^[^\u0000]*$"}  # stored in columns: no NUL
KEY = {"type": ["string", "null"], "minLength": 1, "maxLength": 255,
       "pattern": "^[^\u0000]*$"}
BASE64 = {"type": "string", "description": "Bytes, as base64.",
          "pattern": r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"}
YEAR = 366 * 86400
LEASE = {"type": "number", "exclusiveMinimum": 0, "maximum": 12 * 3600}
STRING_OR_NULL = {"type": ["string", "null"]}
NUMBER_OR_NULL = {"type": ["number", "null"]}
HEADERS = {"type": "object", "maxProperties": 64,
           "propertyNames": {"minLength": 1, "maxLength": 255, "pattern": "^[^\u0000]*$"},
           "additionalProperties": {"type": "string", "maxLength": 4096,
                                    "pattern": "^[^\u0000]*$"}}
RATE = {"type": ["string", "null"], "description": 'A rate limit such as "100/s", "10/m".',
        "pattern": r"^(?:[1-9][0-9]{0,5}(?:\.[0-9]{1,6})?|0\.[0-9]{0,5}[1-9])"
                   r"/(?:s|sec|second|m|min|minute|h|hour)$"}


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def obj(properties: dict[str, Any], required: tuple[str, ...] = (), *,
        closed: bool = True) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    if closed:
        schema["additionalProperties"] = False
    return schema


_SEND_OPTIONS = {"priority": {"type": "integer", "minimum": 0, "maximum": 9},
                 "ordering_key": KEY, "delay": {"type": "number", "minimum": 0,
                                                "maximum": YEAR},
                 "headers": HEADERS, "dedup_id": KEY}
_BODY_OUT = {"body": {"description": "A JSON value."}, "body_base64": BASE64}
_MESSAGE_OUT = {"id": {"type": "string"}, **_BODY_OUT, "priority": {"type": "integer"},
                "ordering_key": STRING_OR_NULL, "headers": {"type": "object"},
                "attempt": {"type": "integer"}, "enqueued_at": {"type": "number"}}
_ERRORS = {"type": "array", "items": obj({"attempt": {"type": "integer"},
                                          "error": {"type": "string"},
                                          "at": {"type": "number"}},
                                         ("attempt", "error", "at"))}
_RETRY = {**obj({"base": {"type": "number", "minimum": 0, "maximum": 10 * 365 * 86400},
                 "factor": {"type": "number", "minimum": 1, "maximum": 100},
                 "max": {"type": "number", "minimum": 0, "maximum": 10 * 365 * 86400},
                 "jitter": {"type": "number", "minimum": 0, "maximum": 1}}),
          "description": "Backoff after a failed attempt: min(max, base * factor**(n-1)) "
                         "seconds. base must not exceed max (defaults: base 1, max 300); "
                         "a pair where it does is refused with 400."}
_SETTINGS_IN = {
    "lease": {**LEASE, "description": "Seconds a receive holds a message."},
    "max_attempts": {"type": "integer", "minimum": 1, "maximum": 1000},
    "aging": {"type": ["number", "null"], "exclusiveMinimum": 0, "maximum": 30 * 86400},
    "retry": _RETRY,
    "dedup_window": {"type": "number", "minimum": 0, "maximum": 30 * 86400},
    "max_message_size": {"type": "integer", "minimum": 1, "maximum": 64 * 1024 * 1024},
    "max_in_flight": {"type": ["integer", "null"], "minimum": 1, "maximum": 1_000_000},
    "on_dead": {"type": "string", "enum": ["continue", "park"]},
    "rate": RATE,
    "burst": {"type": ["integer", "null"], "minimum": 1, "maximum": 1_000_000,
              "description": "Needs a rate."},
    "slo": {"type": ["object", "null"], "propertyNames": {"pattern": "^[0-9]$"},
            "additionalProperties": {"type": "number", "exclusiveMinimum": 0,
                                     "maximum": 30 * 86400},
            "description": "Priority (0-9) -> the longest a message of it should wait, "
                           "in seconds."},
    "order": {"type": "string", "enum": ["priority", "deadline"],
              "description": "deadline: earliest deadline (available + the priority's "
                             "slo target) first; needs slo, excludes aging (rule 41)."},
}
# A burst needs a rate limit to go with it.
# Deadline order (rule 41) needs targets given with it, and no aging.
_BURST_NEEDS_RATE = {"dependentSchemas": {"burst": {"anyOf": [
    {"properties": {"burst": {"type": "null"}}},
    {"required": ["rate"], "properties": {"rate": {"type": "string"}}}]},
    "order": {"anyOf": [
        {"properties": {"order": {"const": "priority"}}},
        {"required": ["slo"], "properties": {"slo": {"type": "object", "minProperties": 1},
                                             "aging": {"type": "null"}}}]}}}
_FILTER = {"error": {**TEXT, "description": "Text in the last error."},
           "older_than": {"type": "number", "minimum": 0, "maximum": 10 * 365 * 86400,
                          "description": "Seconds dead."},
           "ordering_key": {**KEY, "type": "string"},
           "limit": {"type": "integer", "minimum": 1, "maximum": 100000}}
_SUB_FILTER = {"type": ["object", "null"], "minProperties": 1,
               "propertyNames": {"minLength": 1, "pattern": "^[^\u0000]*$"},
               "additionalProperties": {"anyOf": [
                   TEXT, {"type": "array", "minItems": 1, "items": TEXT}]},
               "description": "Header name -> an accepted value or a list of them."}

SCHEMAS: dict[str, Any] = {
    "Error": obj({"error": obj({"code": {"type": "string"}, "message": {"type": "string"}},
                               ("code", "message"))}, ("error",)),
    "OutgoingMessage": {"oneOf": [
        obj({"body": {"description": "Any JSON value."}, **_SEND_OPTIONS}, ("body",)),
        obj({"body_base64": BASE64, **_SEND_OPTIONS}, ("body_base64",))],
        "description": "Exactly one of body (a JSON value) and body_base64 (bytes)."},
    "SendRequest": {"oneOf": [ref("OutgoingMessage"), obj(
        {"messages": {"type": "array", "minItems": 1, "maxItems": 1000,
                      "items": ref("OutgoingMessage")}}, ("messages",))]},
    "Ids": obj({"ids": {"type": "array", "items": {"type": "string"}}}, ("ids",)),
    "Cancelled": obj({"id": {"type": "string"}, "cancelled": {
        "enum": ["waiting", "running"], "description":
        "waiting: removed, it never starts; running: its handler is asked to stop within "
        "a second, and every later ack of it is refused"}}, ("id", "cancelled")),
    "ReceiveRequest": obj({"max_messages": {"type": "integer", "minimum": 1, "maximum": 1000},
                           "lease": {**LEASE, "type": ["number", "null"]},
                           "wait": {"type": "number", "minimum": 0}}),
    "ReceivedMessage": obj({**_MESSAGE_OUT, "receipt": {"type": "string"},
                            "lease_until": {"type": "number"},
                            "fencing_token": {
                                "type": "integer", "minimum": 1, "description":
                                "Grows with every lease: a downstream refuses a write "
                                "carrying a lower token than it has seen (rule 41)."}},
                           ("id", "receipt", "priority", "headers", "attempt",
                            "fencing_token")),
    "Received": obj({"messages": {"type": "array", "items": ref("ReceivedMessage")}},
                    ("messages",)),
    "AckRequest": obj({"receipts": {"type": "array", "minItems": 1, "maxItems": 1000,
                                    "items": RECEIPT}}, ("receipts",)),
    "AckResults": obj({"results": {"type": "array", "items": obj(
        {"receipt": {"type": "string"}, "acked": {"type": "boolean"},
         "late": {"type": "boolean"}}, ("receipt", "acked", "late"))}}, ("results",)),
    "NackRequest": obj({"receipt": RECEIPT,
                        "delay": {"type": ["number", "null"], "minimum": 0,
                                  "maximum": 10 * 365 * 86400},
                        "error": STRING_OR_NULL}, ("receipt",)),
    "ExtendRequest": obj({"receipt": RECEIPT, "seconds": LEASE}, ("receipt", "seconds")),
    "Settings": {**obj(_SETTINGS_IN), **_BURST_NEEDS_RATE},
    "Configure": {**obj({**_SETTINGS_IN, "reset": {"type": "boolean"}}), **_BURST_NEEDS_RATE},
    "Queue": obj({"name": {"type": "string"}, "paused": {"type": "boolean"},
                  "settings": {"type": "object"},
                  "overridden": {"type": "array", "items": {"type": "string"}},
                  "figures": {"type": "object"}, "overrides": {"type": "object"},
                  "parked_keys": {"type": "array", "items": {"type": "string"}},
                  "priorities": {"type": "array", "items": {"type": "object"}}},
                 ("name", "paused", "settings", "overridden", "figures")),
    "Queues": obj({"queues": {"type": "array", "items": ref("Queue")}}, ("queues",)),
    "PeekedMessage": obj({**_MESSAGE_OUT, "queue": {"type": "string"},
                          "state": {"type": "string"}, "available_at": {"type": "number"}},
                         ("id", "state")),
    "Peeked": obj({"messages": {"type": "array", "items": ref("PeekedMessage")}},
                  ("messages",)),
    "MessageDetails": obj({**_MESSAGE_OUT, "queue": {"type": "string"},
                           "state": {"type": "string"}, "available_at": {"type": "number"},
                           "lease_until": NUMBER_OR_NULL, "dead_at": NUMBER_OR_NULL,
                           "parked": {"type": "boolean"}, "errors": _ERRORS,
                           "last_error": STRING_OR_NULL}, ("id", "state", "errors")),
    "DeadMessage": obj({**_MESSAGE_OUT, "queue": {"type": "string"},
                        "dead_at": {"type": "number"}, "parked": {"type": "boolean"},
                        "errors": _ERRORS, "last_error": STRING_OR_NULL},
                       ("id", "dead_at", "errors")),
    "DeadList": obj({"count": {"type": "integer"}, "count_exact": {"type": "boolean"},
                     "messages": {"type": "array", "items": ref("DeadMessage")}},
                    ("count", "count_exact", "messages")),
    "DeadGroups": obj({"groups": {"type": "array", "items": obj(
        {"error": {"type": "string"}, "count": {"type": "integer"},
         "first_seen": {"type": "number"}, "last_seen": {"type": "number"},
         "example_id": {"type": "string"}, "example_error": {"type": "string"}},
        ("error", "count", "first_seen", "last_seen", "example_id"))},
        "scanned": {"type": "integer"}, "more": {"type": "boolean"}},
        ("groups", "scanned", "more")),
    "DeadFilter": {"oneOf": [
        obj({"ids": {"type": "array", "maxItems": 100000, "items": MESSAGE_ID}}, ("ids",)),
        obj(_FILTER)],
        "description": "ids, or a filter (error, older_than, ordering_key) with limit "
                       "(default 1000)."},
    "Topics": obj({"topics": {"type": "array", "items": obj(
        {"name": {"type": "string"}, "subscriptions": {"type": "array", "items": obj(
            {"queue": {"type": "string"}, "filter": {"type": ["object", "null"]}})}})}},
        ("topics",)),
    "SubscribeRequest": obj({"subscription": NAME, "filter": _SUB_FILTER,
                             "settings": ref("Settings")}, ("subscription",)),
    "Copies": obj({"copies": {"type": "array", "items": {
        "type": "object", "additionalProperties": {"type": "string"}}}}, ("copies",)),
    "DesiredWorkers": {"type": "object", "required": ["at"],
                       "properties": {"at": NUMBER_OR_NULL, "total": {"type": "integer"},
                                      "queues": {"type": "array"}}},
    "Workers": obj({"workers": {"type": "array", "items": {"type": "object"}}},
                   ("workers",)),
    "Schedules": obj({"schedules": {"type": "array", "items": {"type": "object"}}},
                     ("schedules",)),
    "Autoscalers": obj({"autoscalers": {"type": "array", "items": ref("Autoscaler")},
                        "decisions": {"type": "array", "items": ref("Autoscaler")}},
                       ("autoscalers",)),
    "Autoscaler": obj({
        "id": {"type": "string"}, "queue": {"type": "string"}, "host": {"type": "string"},
        "pid": {"type": "integer"}, "workers": {"type": "integer"},
        "desired": {"type": "integer"},
        "decision": {"type": "string", "enum": ["grow", "shrink", "hold", "stop"]},
        "reason": {"type": "string"}, "at": {"type": "number"},
        "ceiling": {"type": ["integer", "null"]}, "minimum": {"type": "integer"},
        "maximum": {"type": "integer"}, "throughput": NUMBER_OR_NULL,
        "handler_time": NUMBER_OR_NULL},
        ("id", "queue", "workers", "desired", "decision", "reason", "at")),
    "ScheduleName": obj({"name": {"type": "string", "minLength": 1, "maxLength": 200}},
                        ("name",)),
    "ScheduleState": obj({"name": {"type": "string"}, "paused": {"type": "boolean"}},
                         ("name", "paused")),
    "Levels": obj({"now": {"type": "number"}, "seconds": {"type": "number"},
                   "slot_seconds": {"type": "number"}, "totals": ref("LevelSeries"),
                   "queues": {"type": "array", "items": ref("LevelSeries")}},
                  ("now", "seconds", "slot_seconds", "totals", "queues")),
    "LevelSeries": {"type": "object", "description": "Columns, one value per slot: at "
                    "(broker clock), ready, in_flight, delayed, dead, sent_per_second, "
                    "acked_per_second (null where no rate is known); a queue also has name.",
                    "properties": {"name": {"type": "string"},
                                   "at": {"type": "array", "items": {"type": "number"}}},
                    "required": ["at"]},
    "History": obj({"now": {"type": "number"}, "messages": {"type": "array", "items": {
        "type": "object", "description": "A finished message: id, queue, outcome (acked, "
        "dead, cancelled), body and body_encoding (null: not kept), headers, priority, "
        "ordering_key, dedup_id, enqueued_at, finished_at, consumer, handler_time and "
        "attempts (each: attempt, error, consumer, started_at, ended_at, handler_time).",
        "required": ["id", "queue", "outcome", "finished_at", "attempts"]}}},
        ("now", "messages")),
    "Done": {"type": "object", "description": "What was done, e.g. {\"paused\": true}."},
    "Health": obj({"ok": {"type": "boolean"}}, ("ok",)),
}


@dataclass(frozen=True)
class Param:
    """A query parameter of an operation."""

    name: str
    schema: dict[str, Any]
    description: str = ""


@dataclass(frozen=True)
class Doc:
    """What the OpenAPI document says of one operation."""

    summary: str
    role: str | None  # the least role, or None for an open route
    request: str | None = None  # a schema name
    response: str = "Done"
    query: tuple[Param, ...] = ()
    content_type: str = "application/json"
    statuses: tuple[int, ...] = field(default=(400, 404, 408, 409, 413, 503))


def _operation(method: str, path: str, doc: Doc) -> dict[str, Any]:
    parameters: list[dict[str, Any]] = [
        {"name": name, "in": "path", "required": True,
         "schema": MESSAGE_ID if name == "message_id" else NAME}
        for name in _path_names(path)]
    parameters += [{"name": p.name, "in": "query", "required": False, "schema": p.schema,
                    "description": p.description} for p in doc.query]
    if doc.content_type == "application/json":
        content: dict[str, Any] = {"application/json": {"schema": ref(doc.response)}}
    else:
        content = {doc.content_type: {"schema": {"type": "string"}}}
    responses: dict[str, Any] = {"200": {"description": "OK", "content": content}}
    statuses = set(doc.statuses)
    if doc.role is not None:
        statuses |= {401, 403}
    for status in sorted(statuses):
        responses[str(status)] = {"$ref": f"#/components/responses/E{status}"}
    found: dict[str, Any] = {
        "summary": doc.summary, "operationId": f"{method}_{path}".replace("/", "_")
        .replace("{", "").replace("}", "").lower(),
        "parameters": parameters, "responses": responses,
        "x-hailq-role": doc.role or "none"}
    if doc.role is not None:
        found["security"] = [{"bearer": []}, {"cookie": []}]
    else:
        found["security"] = []
    if doc.request is not None:
        found["requestBody"] = {"required": doc.request in _BODY_REQUIRED, "content": {
            "application/json": {"schema": ref(doc.request)}}}
    return found


# Requests with nothing to say may have no body at all; these must have one.
_BODY_REQUIRED = frozenset({"SendRequest", "AckRequest", "NackRequest", "ExtendRequest",
                            "SubscribeRequest", "ScheduleName"})


def _path_names(path: str) -> list[str]:
    return [part[1:-1] for part in path.split("/") if part.startswith("{")]


_REASONS = {400: "Bad input: nothing was changed.", 401: "No valid token.",
            403: "A foreign Host or Origin, a cookie change without Origin, or a role "
                 "that may not do this.", 404: "No such queue, topic, subscription or "
                 "message.", 405: "Method not allowed.",
            408: "The body did not all arrive within the server's read timeout.",
            409: "A conflict: the queue holds messages, the topic has subscriptions, or "
                 "the receipt lost its lease.", 413: "The body is larger than the cap.",
            503: "The database does not answer."}


def openapi(operations: list[tuple[str, str, Doc]], max_wait: float) -> dict[str, Any]:
    """The OpenAPI 3.1 document of ``operations`` (method, path, doc)."""
    paths: dict[str, dict[str, Any]] = {}
    for method, path, doc in operations:
        paths.setdefault(path, {})[method.lower()] = _operation(method.lower(), path, doc)
    schemas = dict(SCHEMAS)
    receive = dict(schemas["ReceiveRequest"])
    receive["properties"] = {**receive["properties"],
                             "wait": {"type": "number", "minimum": 0, "maximum": max_wait}}
    schemas["ReceiveRequest"] = receive
    return {
        "openapi": "3.1.0",
        "info": {"title": "hailq", "version": hailq.__version__,
                 "description": "hailq's HTTP API (hailq serve). Bodies are JSON; message "
                                "bodies travel as `body` (a JSON value) or `body_base64` "
                                "(bytes). Errors are {\"error\": {\"code\", \"message\"}}."},
        "paths": paths,
        "components": {
            "schemas": schemas,
            "responses": {f"E{s}": {"description": text, "content": {
                "application/json": {"schema": ref("Error")}}} for s, text in _REASONS.items()},
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "cookie": {"type": "apiKey", "in": "cookie", "name": "hailq_token"}}},
    }
