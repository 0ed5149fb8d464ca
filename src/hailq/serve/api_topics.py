"""Routes on topics and subscriptions (rules 19, 20, 32), and the read-only lists of
workers, periodic schedules and autoscalers."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from hailq.broker import Broker
from hailq.errors import InvalidArgument
from hailq.serve.api_io import (
    SETTING_NAMES,
    blocking,
    body_of,
    broker_of,
    envelopes,
    name_param,
    ok,
    query_flag,
    record,
    settings_of,
    text,
)
from hailq.serve.pages_data import listed_topics
from hailq.serve.polls import polls_of


def _topics(broker: Broker) -> list[dict[str, Any]]:
    return [{"name": name, "subscriptions": [{"queue": s.queue, "filter": s.filter}
                                             for s in subs]}
            for name, subs in listed_topics(broker)]


async def list_topics(request: Request) -> Response:
    broker = broker_of(request)
    return ok({"topics": await blocking(lambda: _topics(broker))})


async def declare_topic(request: Request) -> Response:
    broker = broker_of(request)
    name = name_param(request, "topic")
    await body_of(request, frozenset())
    await blocking(lambda: broker.topic(name))
    return ok({"name": name})


async def delete_topic(request: Request) -> Response:
    """409 while it has subscriptions, unless ``?force=true``."""
    broker = broker_of(request)
    name = name_param(request, "topic")
    force = query_flag(request, "force")

    def run() -> int:
        broker.get_topic(name)
        return broker.delete_topic(name, force=force)

    removed = await blocking(run)
    return ok({"deleted": True, "subscriptions_removed": removed})


async def subscribe(request: Request) -> Response:
    """``{"subscription", "filter", "settings"}``: the subscription's queue is declared."""
    broker = broker_of(request)
    name = name_param(request, "topic")
    data = await body_of(request, frozenset({"subscription", "filter", "settings"}))
    subscription = text(data, "subscription", required=True) or ""
    wanted = data.get("filter")
    settings = data.get("settings") or {}
    if not isinstance(settings, dict) or set(settings) - SETTING_NAMES:
        raise InvalidArgument("settings must be an object of queue settings: "
                              + ", ".join(sorted(SETTING_NAMES)))

    def run() -> dict[str, Any]:
        queue = broker.get_topic(name).subscribe(subscription, wanted,
                                                 **settings_of(settings))
        return {"topic": name, "subscription": queue.name, "filter": wanted}

    return ok(await blocking(run))


async def unsubscribe(request: Request) -> Response:
    broker = broker_of(request)
    name = name_param(request, "topic")
    subscription = name_param(request, "subscription")
    await blocking(lambda: broker.get_topic(name).unsubscribe(subscription))
    return ok({"unsubscribed": True})


async def publish(request: Request) -> Response:
    """Like sending: one message or ``{"messages": [...]}``; per message the id of each
    copy by subscription: ``{"copies": [{"subscription": "id"}, ...]}``."""
    name = name_param(request, "topic")
    items = envelopes(await body_of(request))
    # On the async API, as the message routes (api_messages.py).
    topic = await (await polls_of(request).broker()).get_topic(name)
    return ok({"copies": await topic.publish_many(items)})


async def list_workers(request: Request) -> Response:
    broker = broker_of(request)
    found = await blocking(broker.workers)
    now = await blocking(broker.now)
    return ok({"workers": [{**record(w), "seen_ago": max(now - w.last_seen, 0.0)}
                           for w in found]})


async def list_schedules(request: Request) -> Response:
    broker = broker_of(request)
    found = await blocking(broker.schedules)
    return ok({"schedules": [record(s) for s in found]})


async def list_autoscalers(request: Request) -> Response:
    """The last decision of each ``hailq autoscale`` process of the last hour (rule 24),
    with ``?queue=NAME`` only that queue's, and then also its last ``decisions``."""
    broker = broker_of(request)
    queue = request.query_params.get("queue")
    latest = await blocking(lambda: broker.autoscalers(queue))
    doc: dict[str, Any] = {"autoscalers": [record(a) for a in latest]}
    if queue is not None:
        recent = await blocking(lambda: broker.autoscale_decisions(queue, 20))
        doc["decisions"] = [record(a) for a in recent]
    return ok(doc)
