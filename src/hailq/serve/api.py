"""The route table of the HTTP API under ``/api``: each operation with its handler and
what the OpenAPI document says of it (role, bodies, query parameters)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from hailq.history import AGO, EPOCH, ISO
from hailq.serve import (
    api_dead,
    api_history,
    api_levels,
    api_messages,
    api_queues,
    api_schedules,
    api_topics,
)
from hailq.serve.schemas import NAME, TEXT, Doc, Param

Handler = Callable[[Request], Awaitable[Response]]

Q = "/api/queues/{queue}"
T = "/api/topics/{topic}"
_FORCE = Param("force", {"type": "boolean"}, "Delete even if it is not empty.")
_LIMIT = Param("limit", {"type": "integer", "minimum": 1, "maximum": 1000}, "At most this many.")
_ONE_QUEUE = Param("queue", NAME, "Only this queue.")
_DEAD = (Param("error", TEXT, "Text in the error of any attempt."),
         Param("older_than", {"type": "number", "minimum": 0, "maximum": 10 * 365 * 86400},
               "Dead for at least seconds."),
         Param("ordering_key", {"type": "string", "maxLength": 255, "pattern": TEXT["pattern"]}),
         _LIMIT)

# History's filters; an empty one is no filter (as the dashboard's form sends them).
_KEY = {"type": "string", "maxLength": 255, "pattern": TEXT["pattern"]}
_WHEN = {"type": "string", "pattern": f"^({AGO}|{EPOCH}|{ISO})?$"}

OPERATIONS: list[tuple[str, str, Handler, Doc]] = [
    ("GET", "/api/queues", api_queues.list_queues,
     Doc("Every queue: settings and figures", "read", response="Queues", statuses=(503,))),
    ("GET", Q, api_queues.show_queue,
     Doc("One queue, with per-priority figures", "read", response="Queue")),
    ("PUT", Q, api_queues.declare_queue,
     Doc("Declare a queue (or update what it declares)", "admin", "Settings", "Queue")),
    ("PATCH", Q, api_queues.configure_queue,
     Doc("An operator's override of settings, or reset", "admin", "Configure", "Queue")),
    ("DELETE", Q, api_queues.delete_queue,
     Doc("Delete a queue (409 while it holds messages, unless force)", "admin",
         query=(_FORCE,))),
    ("POST", f"{Q}/pause", api_queues.pause_queue, Doc("Pause delivery", "admin")),
    ("POST", f"{Q}/resume", api_queues.resume_queue, Doc("Resume delivery", "admin")),
    ("POST", f"{Q}/purge", api_queues.purge_queue,
     Doc("Delete every live message (or the dead ones)", "admin")),
    ("POST", f"{Q}/messages", api_messages.send,
     Doc("Send one message or a batch", "client", "SendRequest", "Ids")),
    ("GET", f"{Q}/messages", api_messages.peek,
     Doc("Look at live messages without leasing them", "read", response="Peeked",
         query=(_LIMIT,))),
    ("GET", f"{Q}/messages/{{message_id}}", api_messages.show_message,
     Doc("One message: state, attempts, the error of each", "read",
         response="MessageDetails")),
    ("DELETE", f"{Q}/messages/{{message_id}}", api_messages.delete_message,
     Doc("Delete one message", "admin")),
    ("POST", f"{Q}/messages/{{message_id}}/cancel", api_messages.cancel_message,
     Doc("Cancel one message: waiting, it never starts; running, its handler is stopped "
         "(404 when acked, dead or unknown)", "admin", response="Cancelled")),
    ("POST", f"{Q}/receive", api_messages.receive,
     Doc("Lease messages, waiting up to `wait` seconds for one", "client", "ReceiveRequest",
         "Received")),
    ("POST", f"{Q}/ack", api_messages.ack,
     Doc("Ack by receipt", "client", "AckRequest", "AckResults")),
    ("POST", f"{Q}/nack", api_messages.nack,
     Doc("Give a message back (retry later, or dead after its last attempt)", "client",
         "NackRequest")),
    ("POST", f"{Q}/extend", api_messages.extend,
     Doc("Extend a lease", "client", "ExtendRequest")),
    ("GET", f"{Q}/dead", api_dead.list_dead,
     Doc("Dead letters, filtered", "read", response="DeadList", query=_DEAD)),
    ("GET", f"{Q}/dead/groups", api_dead.dead_groups,
     Doc("Dead letters grouped by their last error (the oldest 1000 that match)", "read",
         response="DeadGroups", query=_DEAD[:3])),
    ("POST", f"{Q}/dead/redrive", api_dead.redrive,
     Doc("Redrive dead letters by ids or filter (server-side, up to limit)", "admin",
         "DeadFilter")),
    ("POST", f"{Q}/dead/delete", api_dead.delete,
     Doc("Delete dead letters by ids or filter (server-side, up to limit)", "admin",
         "DeadFilter")),
    ("GET", "/api/desired_workers", api_queues.desired,
     Doc("Worker processes each queue wants (for autoscalers)", "read",
         response="DesiredWorkers", query=(_ONE_QUEUE,), statuses=(400, 404, 503))),
    ("GET", "/api/topics", api_topics.list_topics,
     Doc("Topics with their subscriptions", "read", response="Topics", statuses=(503,))),
    ("PUT", T, api_topics.declare_topic, Doc("Declare a topic", "admin")),
    ("DELETE", T, api_topics.delete_topic,
     Doc("Delete a topic (409 while it has subscriptions, unless force)", "admin",
         query=(_FORCE,))),
    ("POST", f"{T}/subscriptions", api_topics.subscribe,
     Doc("Subscribe a queue to the topic", "admin", "SubscribeRequest")),
    ("DELETE", f"{T}/subscriptions/{{subscription}}", api_topics.unsubscribe,
     Doc("Remove a subscription (its queue stays)", "admin")),
    ("POST", f"{T}/publish", api_topics.publish,
     Doc("Publish one message or a batch to every subscription", "client", "SendRequest",
         "Copies")),
    ("GET", "/api/workers", api_topics.list_workers,
     Doc("Workers with their heartbeats", "read", response="Workers", statuses=(503,))),
    ("GET", "/api/schedules", api_topics.list_schedules,
     Doc("Periodic schedules", "read", response="Schedules", statuses=(503,))),
    ("POST", "/api/schedules/pause", api_schedules.pause_schedule,
     Doc("Pause a periodic schedule by name (every scheduler stops sending it)", "admin",
         "ScheduleName", "ScheduleState")),
    ("POST", "/api/schedules/resume", api_schedules.resume_schedule,
     Doc("Resume a periodic schedule by name (from now on: its paused slots are skipped)",
         "admin", "ScheduleName", "ScheduleState")),
    ("GET", "/api/autoscalers", api_topics.list_autoscalers,
     Doc("Each autoscaler's last decision (of one queue: also its last decisions)",
         "read", response="Autoscalers", query=(_ONE_QUEUE,), statuses=(400, 503))),
    ("GET", "/api/history", api_history.history,
     Doc("Finished messages (acked, dead, cancelled) of queues that keep history",
         "read", response="History", query=(
             _ONE_QUEUE, Param("id", _KEY, "Only this message id."),
             Param("dedup_id", _KEY, "Only this dedup id."),
             Param("header", {"type": "string", "pattern": "^([^=\u0000]+=[^\u0000]+)?$"},
                   "NAME=VALUE: only messages with this header value."),
             Param("ordering_key", _KEY, "Only this ordering key."),
             Param("outcome", {"type": "string", "enum": ["acked", "dead", "cancelled"]}),
             Param("since", _WHEN, 'Finished at or after: a duration ago ("24h"), an ISO '
                   "time or epoch seconds."),
             Param("until", _WHEN, "Finished before (as since)."), _LIMIT),
         statuses=(400, 503))),
    ("GET", "/api/levels", api_levels.levels,
     Doc("Queue levels and rates over time, recorded every 10 s (the dashboard's charts)",
         "read", response="Levels", query=(_ONE_QUEUE, Param(
             "seconds", {"type": "integer", "minimum": 1, "maximum": api_levels.MAX_SECONDS},
             "How far back, in seconds (default 3600).")), statuses=(400, 404, 503))),
]


def routes() -> list[BaseRoute]:
    """The API's routes, one per operation."""
    return [Route(path, handler, methods=[method]) for method, path, handler, _ in OPERATIONS]
