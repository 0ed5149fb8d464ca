"""Publish/subscribe: ``hailq topics``, ``hailq subscribe`` and ``hailq publish``."""

from __future__ import annotations

import json
from typing import Any

import click

from hailq.cli.context import check_queue_name, common_options, current_app
from hailq.cli.output import key, text
from hailq.cli.sending import BODY_HELP, envelope, message_options, pairs, read_body


def _filter_text(wanted: dict[str, str | list[str]] | None) -> str:
    if not wanted:
        return "(all messages)"
    return " and ".join(f"{k}={v}" if isinstance(v, str) else f"{k} in {json.dumps(v)}"
                        for k, v in sorted(wanted.items()))


@click.command("topics")
@common_options
def topics() -> None:
    """List every topic with its subscriptions and their header filters."""
    app = current_app()
    with app.broker() as broker:
        found = {t.name: t.subscriptions() for t in broker.topics()}
    if app.out.json:
        app.out.emit_json([{"topic": name, "subscriptions": [
            {"subscription": s.queue, "filter": s.filter} for s in subs]}
            for name, subs in found.items()])
        return
    rows: list[list[Any]] = []
    for name, subs in found.items():
        rows.extend([name, s.queue, _filter_text(s.filter)] for s in subs)
        if not subs:
            rows.append([name, None, "(no subscriptions: published messages go nowhere)"])
    app.out.table([key("TOPIC"), key("SUBSCRIPTION"), text("FILTER")], rows,
                  empty="no topics yet; 'hailq subscribe TOPIC SUBSCRIPTION' creates one")


@click.command("subscribe")
@click.argument("topic_name", metavar="TOPIC", callback=check_queue_name)
@click.argument("subscription", callback=check_queue_name)
@click.option("--filter", "-f", "filters", multiple=True, callback=pairs, metavar="NAME=VALUE",
              help="Only copy messages whose header NAME is VALUE. Repeat the same NAME to "
                   "accept several values; different NAMEs must all match.")
@common_options
def subscribe(topic_name: str, subscription: str, filters: list[tuple[str, str]]) -> None:
    """Subscribe the queue SUBSCRIPTION to TOPIC, creating both if needed.

    From now on every message published to TOPIC (that passes the filter) is
    copied into SUBSCRIPTION, an ordinary queue. Subscribing again replaces
    the filter.
    """
    app = current_app()
    wanted: dict[str, list[str]] = {}
    for name, value in filters:
        wanted.setdefault(name, []).append(value)
    flat = {k: v[0] if len(v) == 1 else v for k, v in wanted.items()} or None
    with app.broker(create=True) as broker:
        broker.topic(topic_name).subscribe(subscription, filter=flat)
    if app.out.json:
        app.out.emit_json({"topic": topic_name, "subscription": subscription, "filter": flat})
    else:
        app.out.line(f"{subscription} subscribes to {topic_name}: {_filter_text(flat)}")


@click.command("publish", epilog="\b\n" + BODY_HELP)
@click.argument("topic_name", metavar="TOPIC", callback=check_queue_name)
@click.argument("body")
@message_options
@common_options
def publish(topic_name: str, body: str, priority: int, ordering_key: str | None, delay: float,
            dedup_id: str | None, headers: list[tuple[str, str]], as_text: bool,
            raw: bool) -> None:
    """Publish BODY to TOPIC: one copy into every subscription whose filter matches.

    Prints the id of each copy by subscription. The topic must exist
    ('hailq subscribe' creates it).
    """
    app = current_app()
    message = envelope(read_body(body, raw=raw, as_text=as_text), priority, ordering_key,
                       delay, headers, dedup_id)
    with app.broker() as broker:
        copies = app.topic(broker, topic_name).publish(
            message.body, priority=message.priority, ordering_key=message.ordering_key,
            delay=message.delay, headers=message.headers, dedup_id=message.dedup_id)
    if not copies:
        app.out.warn(f"no subscription of {topic_name} matched; the message went nowhere")
    if app.out.json:
        app.out.emit_json({"topic": topic_name, "copies": copies})
    else:
        app.out.table([key("SUBSCRIPTION"), key("ID")], sorted(copies.items()),
                      title=f"published to {topic_name}", empty="no copies")


COMMANDS = [topics, subscribe, publish]
