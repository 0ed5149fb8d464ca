"""Looking at queues: ``hailq queues``, ``hailq stats`` and ``hailq peek``."""

from __future__ import annotations

import contextlib
import itertools
import time
from dataclasses import asdict
from typing import Any

import click
from rich.console import Group, RenderableType
from rich.text import Text

import hailq
from hailq.cli.context import App, Finite, check_queue_name, common_options, current_app
from hailq.cli.output import age, make_table, preview, record

MAX_PEEK = 100_000  # the most Queue.peek returns at once
COUNTERS = ("sent", "acked", "nacked", "redelivered", "dead_lettered", "late_acks")


@click.command("queues")
@common_options
def queues() -> None:
    """List every queue with its ready, scheduled, in-flight, blocked and dead counts.

    OLDEST is the age of the oldest ready message: how long the front of the
    queue has waited. PAUSED marks a queue an operator paused ('hailq pause').
    With --json each queue also has its effective settings and the names of
    those an operator overrode ('hailq configure').
    """
    app = current_app()
    with app.broker() as broker:
        found = _collect(broker, None)
    if app.out.json:
        app.out.emit_json([{"queue": s.queue, "ready": s.ready, "scheduled": s.scheduled,
                            "in_flight": s.in_flight, "blocked": s.blocked, "dead": s.dead,
                            "oldest_ready_age": s.oldest_ready_age, "paused": s.paused,
                            **settings_record(q)} for q, s in found])
        return
    app.out.table(
        ["QUEUE", "READY", "SCHEDULED", "IN FLIGHT", "BLOCKED", "DEAD", "OLDEST", "PAUSED"],
        [[s.queue, s.ready, s.scheduled, s.in_flight, s.blocked, s.dead,
          age(s.oldest_ready_age), "paused" if s.paused else "-"] for _, s in found],
        empty="no queues yet; declare one in code, or 'hailq send --create QUEUE BODY'")


def settings_record(queue: hailq.Queue) -> dict[str, Any]:
    """A queue's effective settings and which of them an operator overrode."""
    return {"settings": asdict(queue.settings), "overridden": sorted(queue.overrides)}


@click.command("stats")
@click.argument("queue_name", metavar="[QUEUE]", required=False, callback=check_queue_name)
@click.option("--watch", "-w", is_flag=True, help="Refresh until Ctrl-C.")
@click.option("--interval", type=Finite(min=0.1, max=3600), default=2.0,
              show_default=True, metavar="SECONDS", help="With --watch: seconds between refreshes.")
@click.option("--count", type=click.IntRange(min=1), metavar="N",
              help="With --watch: stop after N refreshes.")
@common_options
def stats(queue_name: str | None, watch: bool, interval: float, count: int | None) -> None:
    """Show every figure of QUEUE (or of all queues): counts, counters since it was
    declared, the ordering keys parked behind a dead message, and whether an
    operator paused it. With --json also its effective settings and which of them
    are overridden.

    With --watch the figures refresh every --interval seconds; with --json as
    well, each refresh is one line of JSON.
    """
    app = current_app()
    if count is not None and not watch:
        raise click.UsageError("--count only goes with --watch")
    with app.broker() as broker:
        if queue_name is not None:
            app.queue(broker, queue_name)  # fail now, not on the first refresh
        if not watch:
            _show_stats(app, _collect(broker, queue_name))
            return
        with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how a watch ends
            _watch(app, broker, queue_name, interval, count)


def _collect(broker: hailq.Broker, queue_name: str | None,
             ) -> list[tuple[hailq.Queue, hailq.QueueStats]]:
    queues = [broker.get_queue(queue_name)] if queue_name is not None else broker.queues()
    found = []
    for queue in queues:
        try:
            found.append((queue, queue.stats()))
        except hailq.QueueNotFound:  # deleted since it was listed
            continue
    return found


def _watch(app: App, broker: hailq.Broker, queue_name: str | None, interval: float,
           count: int | None) -> None:
    rounds = range(count) if count is not None else itertools.count()
    if not app.out.interactive:
        for n in rounds:
            if n:
                time.sleep(interval)
            found = _collect(broker, queue_name)
            if app.out.json:
                app.out.emit_json_line({"at": broker.now(),
                                        "queues": [stats_record(q, s) for q, s in found]})
            else:
                _show_stats(app, found)
        return
    from rich.live import Live

    with Live(console=app.out.console, auto_refresh=False) as live:
        for n in rounds:
            if n:
                time.sleep(interval)
            view = stats_view([s for _, s in _collect(broker, queue_name)])
            note = Text(f"every {interval:g}s at {broker.url}; Ctrl-C to stop", style="dim")
            live.update(Group(view, note), refresh=True)


def _show_stats(app: App, found: list[tuple[hailq.Queue, hailq.QueueStats]]) -> None:
    if app.out.json:
        app.out.emit_json([stats_record(q, s) for q, s in found])
    else:
        app.out.console.print(stats_view([s for _, s in found]))


def stats_record(queue: hailq.Queue, s: hailq.QueueStats) -> dict[str, Any]:
    return {**record(s), "delayed": s.delayed, "backlog": s.backlog,
            **settings_record(queue)}


def stats_view(found: list[hailq.QueueStats]) -> RenderableType:
    """One queue as a list of figures; several as one row each."""
    if len(found) == 1:
        s = found[0]
        rows: list[list[Any]] = [
            ["ready", s.ready], ["scheduled", s.scheduled], ["in flight", s.in_flight],
            ["blocked", s.blocked], ["dead", s.dead], ["backlog", s.backlog],
            ["oldest ready", age(s.oldest_ready_age)],
            *[[c.replace("_", " "), getattr(s, c)] for c in COUNTERS],
            ["parked keys", ", ".join(s.parked_keys) or "-"],
            ["paused", "yes" if s.paused else "no"],
        ]
        return make_table(["FIGURE", "VALUE"], rows, title=f"queue {s.queue}")
    return make_table(
        ["QUEUE", "READY", "SCHEDULED", "IN FLIGHT", "BLOCKED", "DEAD", "OLDEST",
         *[c.replace("_", " ").upper() for c in COUNTERS], "PARKED KEYS", "PAUSED"],
        [[s.queue, s.ready, s.scheduled, s.in_flight, s.blocked, s.dead,
          age(s.oldest_ready_age), *[getattr(s, c) for c in COUNTERS],
          ", ".join(s.parked_keys) or "-", "paused" if s.paused else "-"] for s in found],
        empty="no queues yet")


@click.command("peek")
@click.argument("queue_name", metavar="QUEUE", callback=check_queue_name)
@click.option("--limit", "-n", type=click.IntRange(1, MAX_PEEK), default=10, show_default=True,
              help="Show at most this many messages.")
@common_options
def peek(queue_name: str, limit: int) -> None:
    """Show the live messages of QUEUE in delivery order, without receiving them.

    Nothing changes: no lease is taken and no attempt is counted. When the
    queue holds more than --limit, a note on stderr says how many were left out.
    """
    app = current_app()
    with app.broker() as broker:
        queue = app.queue(broker, queue_name)
        found = queue.peek(limit)
        # Counted only when the list is full: a shorter one is the whole queue.
        live = _live(queue.stats()) if len(found) == limit else len(found)
        now = broker.now()
    if app.out.json:
        app.out.emit_json([record(m) for m in found])
    else:
        app.out.table(
            ["ID", "STATE", "PRIORITY", "KEY", "ATTEMPT", "AGE", "DUE IN", "BODY"],
            [[m.id, m.state, m.priority, m.ordering_key, m.attempt, age(now - m.enqueued_at),
              age(m.available_at - now) if m.available_at > now else "now", preview(m.body)]
             for m in found],
            title=f"queue {queue_name}", empty="no live messages")
    app.out.note_cut_short(len(found), live, f"live messages of {queue_name}", limit=limit,
                           most=MAX_PEEK)


def _live(s: hailq.QueueStats) -> int:
    """The messages ``peek`` can show: every one that is not dead."""
    return s.backlog + s.in_flight


COMMANDS = [queues, stats, peek]
