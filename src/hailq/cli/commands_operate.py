"""An operator's actions (rule 32): ``pause``, ``resume``, ``configure``, ``delete``,
``delete-topic``, ``unsubscribe``, ``show`` and ``delete-message``; ``cancel`` (rule 40)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import click

import hailq
from hailq.cli.commands_dead import print_errors
from hailq.cli.context import Finite, check_id, check_queue_name, common_options, current_app
from hailq.cli.output import age, preview, prose, record, text
from hailq.tracebacks import signature

# The settings `hailq configure` can override, in the order they are shown.
SHOWN = ("lease", "max_attempts", "max_in_flight", "aging", "order", "on_dead",
         "dedup_window", "max_message_size", "rate", "burst", "retry", "retain",
         "retain_bodies")


@click.command("pause")
@click.argument("queue_name", metavar="QUEUE", callback=check_queue_name)
@common_options
def pause(queue_name: str) -> None:
    """Pause QUEUE: receivers and workers get nothing from it (running ones within a
    second) until 'hailq resume'; sends are still accepted.

    The pause is the operator's, kept apart from what code declares: workers that
    start (and declare their queues) do not undo it, nor does a deploy.
    """
    _set_paused(queue_name, True)


@click.command("resume")
@click.argument("queue_name", metavar="QUEUE", callback=check_queue_name)
@common_options
def resume(queue_name: str) -> None:
    """Resume a paused QUEUE: receivers and workers get its messages again."""
    _set_paused(queue_name, False)


def _set_paused(queue_name: str, paused: bool) -> None:
    app = current_app()
    with app.broker() as broker:
        queue = app.queue(broker, queue_name)
        if paused:
            queue.pause()
        else:
            queue.resume()
    if app.out.json:
        app.out.emit_json({"queue": queue_name, "paused": paused})
    else:
        app.out.line(f"{'paused' if paused else 'resumed'} {queue_name}")


class OrNone(click.ParamType):  # type: ignore[type-arg]  # click's generic arguments vary by version
    """A number of ``kind``, or 'none' to take the setting away (no cap, strict
    priority)."""

    def __init__(self, kind: Any) -> None:
        self.kind = kind
        self.name = f"{kind.name}|none"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        if isinstance(value, str) and value.lower() == "none":
            return "none"
        return self.kind.convert(value, param, ctx)


@click.command("configure")
@click.argument("queue_name", metavar="QUEUE", callback=check_queue_name)
@click.option("--lease", type=Finite(min=0.001, max=12 * 3600), metavar="SECONDS",
              help="Lease of a received message.")
@click.option("--max-attempts", type=click.IntRange(1, 1000), metavar="N",
              help="Attempts before a message is dead.")
@click.option("--max-in-flight", type=OrNone(click.IntRange(1, 1_000_000)),
              metavar="N|none", help="Cap on leased messages across all consumers; "
                                     "'none' for no cap.")
@click.option("--aging", type=OrNone(Finite(min=0.001, max=30 * 86400)),
              metavar="SECONDS|none", help="Seconds per priority level; 'none' for strict "
                                           "priority.")
@click.option("--order", type=click.Choice(["priority", "deadline"]),
              help="priority: strict or aged; deadline: the message due first (available "
                   "+ its priority's slo target) goes first (needs slo, no aging).")
@click.option("--on-dead", type=click.Choice(["continue", "park"]),
              help="What a dead head of an ordering key does to its key.")
@click.option("--dedup-window", type=Finite(min=0, max=30 * 86400), metavar="SECONDS",
              help="How long a dedup id is remembered.")
@click.option("--max-message-size", type=click.IntRange(1, 64 * 1024 * 1024), metavar="BYTES",
              help="Largest encoded body accepted.")
@click.option("--rate", metavar="RATE|none",
              help="Rate limit summed over every consumer, such as 100/s, 600/m or "
                   "1000/h; 'none' for no limit (its burst goes with it).")
@click.option("--burst", type=OrNone(click.IntRange(1, 1_000_000)), metavar="N|none",
              help="Messages that may start at once under the rate limit; 'none' for "
                   "one second's worth.")
@click.option("--retain", metavar="DURATION|none",
              help='Keep acked, dead and cancelled messages searchable this long '
                   '(hailq history), such as 24h or 7d; \'none\' keeps nothing.')
@click.option("--retain-bodies/--no-retain-bodies", default=None,
              help="Whether history keeps the messages' bodies.")
@click.option("--reset", is_flag=True,
              help="Clear every override first: back to what code declares.")
@common_options
def configure(queue_name: str, lease: float | None, max_attempts: int | None,
              max_in_flight: Any, aging: Any, order: str | None, on_dead: str | None,
              dedup_window: float | None, max_message_size: int | None,
              rate: str | None, burst: Any, retain: str | None,
              retain_bodies: bool | None, reset: bool) -> None:
    """Override settings of QUEUE, or show them (no option given).

    Overrides are the operator's, kept apart from what code declares: a worker
    that starts, or the next deploy's broker.queue(...), does not undo them. The
    effective settings are the declared ones with each overridden setting
    replaced; running consumers obey lease, attempts, cap, aging and on-dead
    within a second, and a rate limit (--rate, --burst) as well. --reset clears
    every override (given with options, it clears them and then sets those). The
    table marks overridden settings.
    """
    given = {"lease": lease, "max_attempts": max_attempts, "max_in_flight": max_in_flight,
             "aging": aging, "order": order, "on_dead": on_dead,
             "dedup_window": dedup_window,
             "max_message_size": max_message_size,
             "rate": None if rate is None else ("none" if rate.lower() == "none" else rate),
             "burst": burst, "retain": retain, "retain_bodies": retain_bodies}
    changes = {k: (None if isinstance(v, str) and v.lower() == "none" else v)
               for k, v in given.items() if v is not None}
    app = current_app()
    with app.broker() as broker:
        queue = app.queue(broker, queue_name)
        if changes or reset:
            queue.configure(reset=reset, **changes)
        paused = queue.stats().paused
    show_settings(app, queue, paused)


def show_settings(app: Any, queue: hailq.Queue, paused: bool) -> None:
    effective = asdict(queue.settings)
    if app.out.json:
        app.out.emit_json({"queue": queue.name, "paused": paused, "settings": effective,
                           "overridden": sorted(queue.overrides)})
        return
    rows = [[name, _setting_text(effective[name]),
             "override" if name in queue.overrides else "declared"] for name in SHOWN]
    app.out.table(["SETTING", text("VALUE"), "FROM"], rows,
                  title=f"queue {queue.name}" + (" (paused)" if paused else ""))


def _setting_text(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, dict):
        return ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                         for k, v in value.items())
    return f"{value:g}" if isinstance(value, float) else str(value)


@click.command("delete")
@click.argument("queue_name", metavar="QUEUE", callback=check_queue_name)
@click.option("--force", is_flag=True,
              help="Delete it even while it holds messages (they are deleted with it).")
@common_options
def delete(queue_name: str, force: bool) -> None:
    """Delete QUEUE with its settings, counters, overrides and pause.

    Refused (exit 1, nothing deleted) while it holds messages, live or dead,
    unless --force. A queue that is a subscription is unsubscribed from its
    topics: it stops receiving copies. Running workers of it stop getting
    messages; a later declaration makes a new, empty queue.
    """
    app = current_app()
    with app.broker() as broker:
        app.queue(broker, queue_name)
        deleted = broker.delete_queue(queue_name, force=force)
    if app.out.json:
        app.out.emit_json({"queue": queue_name, "deleted": True, "messages_deleted": deleted})
    else:
        app.out.line(f"deleted queue {queue_name}"
                     + (f" and its {deleted} message(s)" if deleted else ""))


@click.command("delete-topic")
@click.argument("topic_name", metavar="TOPIC", callback=check_queue_name)
@click.option("--force", is_flag=True,
              help="Delete it even while it has subscriptions (they are removed; their "
                   "queues stay).")
@common_options
def delete_topic(topic_name: str, force: bool) -> None:
    """Delete TOPIC. Refused (exit 1) while it has subscriptions, unless --force:
    then its subscriptions are removed too, and their queues stay as ordinary
    queues with their messages ('hailq delete' deletes them)."""
    app = current_app()
    with app.broker() as broker:
        app.topic(broker, topic_name)
        removed = broker.delete_topic(topic_name, force=force)
    if app.out.json:
        app.out.emit_json({"topic": topic_name, "deleted": True,
                           "subscriptions_removed": removed})
    else:
        app.out.line(f"deleted topic {topic_name}"
                     + (f" and {removed} subscription(s)" if removed else ""))


@click.command("unsubscribe")
@click.argument("topic_name", metavar="TOPIC", callback=check_queue_name)
@click.argument("subscription", callback=check_queue_name)
@common_options
def unsubscribe(topic_name: str, subscription: str) -> None:
    """Stop copying TOPIC's messages into SUBSCRIPTION. The queue stays, with
    what it holds ('hailq delete' deletes it)."""
    app = current_app()
    with app.broker() as broker:
        app.topic(broker, topic_name).unsubscribe(subscription)
    if app.out.json:
        app.out.emit_json({"topic": topic_name, "subscription": subscription,
                           "unsubscribed": True})
    else:
        app.out.line(f"{subscription} no longer subscribes to {topic_name}")


@click.command("show")
@click.argument("queue_name", metavar="QUEUE", callback=check_queue_name)
@click.argument("message_id", metavar="ID", callback=check_id)
@common_options
def show(queue_name: str, message_id: str) -> None:
    """Show one message of QUEUE by ID: its state as the next receive would find it,
    attempts, headers, body, then each distinct error once with the attempts that
    had it (tracebacks as lines, hailq's own frames folded; --json: every attempt's
    error in full). Changes nothing.

    Exit 1 when QUEUE holds no such message (acked, purged or never sent).
    """
    app = current_app()
    with app.broker() as broker:
        queue = app.queue(broker, queue_name)
        found = queue.get_message(message_id)
        now = broker.now()
    if found is None:
        raise click.ClickException(f"queue {queue_name} holds no message {message_id} "
                                   "(acked, purged, or never sent)")
    if app.out.json:
        app.out.emit_json({**record(found), "last_error": found.last_error})
        return
    rows: list[list[Any]] = [
        ["id", found.id], ["state", found.state + (" (parked)" if found.parked else "")],
        ["attempt", found.attempt], ["priority", found.priority],
        ["ordering key", found.ordering_key or "-"],
        ["enqueued", age(now - found.enqueued_at) + " ago"],
        ["available", "now" if found.available_at <= now
         else "in " + age(found.available_at - now)],
        ["lease ends", "-" if found.lease_until is None
         else "in " + age(max(found.lease_until - now, 0.0))],
        ["died", "-" if found.dead_at is None else age(now - found.dead_at) + " ago"],
        ["headers", ", ".join(f"{k}={v}" for k, v in sorted(found.headers.items())) or "-"],
        ["body", preview(found.body, 200)],
        ["last error", "-" if found.last_error is None else signature(found.last_error)],
    ]
    app.out.table(["FIELD", prose("VALUE")], rows, title=f"message of {queue_name}")
    print_errors(app.out, found.errors, now)


@click.command("delete-message")
@click.argument("queue_name", metavar="QUEUE", callback=check_queue_name)
@click.argument("message_id", metavar="ID", callback=check_id)
@common_options
def delete_message(queue_name: str, message_id: str) -> None:
    """Delete one message of QUEUE by ID, whatever its state. A consumer that holds
    its lease gets LeaseLost when it acks; the next message of its ordering key
    becomes receivable. Counted as purged. Exit 1 when QUEUE holds no such message.
    """
    app = current_app()
    with app.broker() as broker:
        queue = app.queue(broker, queue_name)
        deleted = queue.delete_message(message_id)
    if not deleted:
        raise click.ClickException(f"queue {queue_name} holds no message {message_id} "
                                   "(acked, purged, or never sent); nothing was deleted")
    if app.out.json:
        app.out.emit_json({"queue": queue_name, "id": message_id, "deleted": True})
    else:
        app.out.line(f"deleted message {message_id} of {queue_name}")


@click.command("cancel")
@click.argument("message_id", metavar="ID", callback=check_id)
@click.option("--queue", "-q", "queue_name", metavar="QUEUE", default=None,
              callback=check_queue_name,
              help="The message's queue (spares looking it up by ID).")
@common_options
def cancel(message_id: str, queue_name: str | None) -> None:
    """Cancel one message by ID. Waiting (ready, delayed, behind its ordering key), it
    is removed and never starts. Running, its worker stops the handler within a
    second (HandlerCancelled, as a time limit does); every later ack of it is
    refused; it keeps its max_in_flight slot and its ordering key until its handler
    has stopped or its lease has ended. Counted as purged.

    Exit 1 when no queue holds such a live message (acked, dead, or never sent);
    nothing is changed then.
    """
    app = current_app()
    with app.broker() as broker:
        try:
            found = broker.cancel(message_id, queue=queue_name)
        except hailq.MessageNotFound as exc:
            raise click.ClickException(str(exc)) from None
    if app.out.json:
        app.out.emit_json({"id": message_id, "cancelled": found})
    elif found == "waiting":
        app.out.line(f"cancelled message {message_id}: it was waiting and never starts")
    else:
        app.out.line(f"cancelled message {message_id}: its handler is asked to stop")


COMMANDS = [pause, resume, configure, delete, delete_topic, unsubscribe, show,
            delete_message, cancel]
