"""Looking at queues: ``hailq queues``, ``hailq stats`` and ``hailq peek``."""

from __future__ import annotations

import contextlib
import itertools
import time
from typing import Any

import click
from rich.console import Group, RenderableType
from rich.text import Text

import hailq
from hailq.cli.context import App, Finite, check_queue_name, common_options, current_app
from hailq.cli.output import Col, age, key, make_table, preview, record, text
from hailq.observe.figures import QueueFigures
from hailq.settings import QueueSettings

MAX_PEEK = 100_000  # the most Queue.peek returns at once
COUNTERS = ("sent", "acked", "nacked", "redelivered", "dead_lettered", "late_acks")
# How the counters' columns narrow: the least read ones go first.
COUNTER_SHORT = (None, None, "NACK", "REDELIV", "DEAD-L", "LATE")
COUNTER_DROP = (4, 4, 5, 5, 5, 5)


@click.command("queues")
@common_options
def queues() -> None:
    """List every queue: its settings (lease, attempts, aging, in-flight cap, rate
    limit, service levels) beside its ready, scheduled, in-flight, blocked and dead counts.

    OLDEST is the age of the oldest ready message: how long the front of the
    queue has waited. SLO lists priority:seconds targets (see 'hailq stats').
    PAUSED marks a queue an operator paused ('hailq pause'). The settings are the
    effective ones; with --json, "overridden" names those an operator overrode
    ('hailq configure').
    """
    app = current_app()
    with app.broker() as broker:
        found = [(q, q.stats()) for q in broker.queues()]
    if app.out.json:
        app.out.emit_json([{"queue": s.queue, "ready": s.ready, "scheduled": s.scheduled,
                            "in_flight": s.in_flight, "blocked": s.blocked, "dead": s.dead,
                            "oldest_ready_age": s.oldest_ready_age, "paused": s.paused,
                            "settings": settings_record(q.settings),
                            "overridden": sorted(q.overrides)} for q, s in found])
        return
    app.out.table(
        [key("QUEUE"), "READY", Col("SCHEDULED", short="SCHED", drop=3),
         Col("IN FLIGHT", short="FLIGHT"), Col("BLOCKED", short="BLOCK", drop=3), "DEAD",
         "OLDEST", Col("LEASE", drop=5), Col("ATTEMPTS", short="ATT", drop=5),
         Col("AGING", drop=6), Col("MAX IN FLIGHT", short="CAP", drop=5),
         Col("RATE", drop=6), Col("SLO", drop=4), Col("PAUSED", drop=2)],
        [[s.queue, s.ready, s.scheduled, s.in_flight, s.blocked, s.dead,
          age(s.oldest_ready_age), q.settings.lease, q.settings.max_attempts,
          q.settings.aging, q.settings.max_in_flight, q.settings.rate or "-",
          slo_text(q.settings.slo),
          "paused" if s.paused else "-"] for q, s in found],
        empty="no queues yet; declare one in code, or 'hailq send --create QUEUE BODY'")


def settings_record(q: QueueSettings) -> dict[str, Any]:
    """The settings an operator reads beside the figures; ``slo`` as a list of objects."""
    return {"lease": q.lease, "max_attempts": q.max_attempts, "aging": q.aging,
            "max_in_flight": q.max_in_flight, "on_dead": q.on_dead,
            "rate": q.rate, "burst": q.burst,
            "slo": [{"priority": p, "seconds": t} for p, t in (q.slo or {}).items()]}


def slo_text(slo: dict[int, float] | None) -> str:
    return " ".join(f"{p}:{t:g}s" for p, t in (slo or {}).items()) or "-"


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
    declared, rates per second over the last 1 and 5 minutes, wait and handler time
    per priority (p50/p95/p99) with service-level breaches and compliance, workers,
    desired workers, the ordering keys parked behind a dead message, and the last
    decisions of 'hailq autoscale' for the queue with their reasons.

    Wait is from available to handler start; wait, handler time, acked rates and
    breaches are measured by workers ('hailq worker'), sent and dead-lettered rates
    from the counters workers sample. --json prints one object {"at", "queues": [...]};
    with --watch each refresh is one such object on a line of its own.
    """
    app = current_app()
    if count is not None and not watch:
        raise click.UsageError("--count only goes with --watch")
    with app.broker() as broker:
        if queue_name is not None:
            app.queue(broker, queue_name)  # fail now, not on the first refresh
        if not watch:
            _show_stats(app, broker, _collect(broker, queue_name), line=False)
            return
        with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how a watch ends
            _watch(app, broker, queue_name, interval, count)


def _collect(broker: hailq.Broker, queue_name: str | None) -> list[QueueFigures]:
    if queue_name is not None:
        return [broker.get_queue(queue_name).figures()]
    return [q.figures() for q in broker.queues()]


def _watch(app: App, broker: hailq.Broker, queue_name: str | None, interval: float,
           count: int | None) -> None:
    rounds = range(count) if count is not None else itertools.count()
    if not app.out.interactive:
        for n in rounds:
            if n:
                time.sleep(interval)
            _show_stats(app, broker, _collect(broker, queue_name), line=True)
        return
    from rich.live import Live

    with Live(console=app.out.console, auto_refresh=False) as live:
        for n in rounds:
            if n:
                time.sleep(interval)
            view = stats_view(_collect(broker, queue_name))
            note = Text(f"every {interval:g}s at {broker.url}; Ctrl-C to stop", style="dim")
            live.update(Group(view, note), refresh=True)


def _show_stats(app: App, broker: hailq.Broker, found: list[QueueFigures], *,
                line: bool) -> None:
    if app.out.json:
        document = {"at": found[0].at if found else broker.now(),
                    "queues": [f.record() for f in found]}
        (app.out.emit_json_line if line else app.out.emit_json)(document)
    else:
        app.out.console.print(stats_view(found))


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}/s"


def _span(span: float | None, window: float) -> str:
    """A queue younger than the window: over how long its rates were taken."""
    return "" if span is None or span >= window else f" (over {span:.0f}s)"


def _secs(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value * 1000:.0f}ms" if value < 1 else f"{value:.2f}s"


def priority_view(f: QueueFigures) -> RenderableType:
    """Per priority over the last 5 minutes: claims, wait and handler percentiles, the
    target, breaches (and all time), compliance."""
    return make_table(
        [Col("PRIORITY", short="PRIO"), Col("STARTED", drop=2),
         Col("PER S (1M)", short="PER S", drop=2), Col("WAIT P50", short="W50"),
         Col("WAIT P95", short="W95", drop=3), Col("WAIT P99", short="W99"),
         Col("HANDLER P50", short="H50"), Col("HANDLER P95", short="H95", drop=3),
         Col("HANDLER P99", short="H99"), "SLO", Col("BREACHES (ALL)", short="BR ALL", drop=1),
         Col("BREACHES (5M)", short="BR 5M"), Col("COMPLIANCE", short="COMPL")],
        [[p.priority, p.started, f"{p.started_per_second_1m:.2f}", _secs(p.wait_p50),
          _secs(p.wait_p95), _secs(p.wait_p99), _secs(p.handler_p50), _secs(p.handler_p95),
          _secs(p.handler_p99), "-" if p.slo is None else f"{p.slo:g}s", p.breaches_total,
          p.breaches_5m,
          "-" if p.compliance is None else f"{p.compliance * 100:.2f}%"]
         for p in f.priorities],
        title=f"per priority ({f.queue}, last {f.window / 60:g} min)",
        empty="nothing measured yet (nothing received)")


def autoscale_view(f: QueueFigures) -> RenderableType:
    """The last decisions of the queue's autoscalers (rule 24), newest first."""
    return make_table(
        ["AGE", key("AUTOSCALER", drop=1), Col("WORKERS", short="WRK"),
         Col("DESIRED", short="DES"), Col("MIN-MAX", drop=1),
         Col("SATURATED AT", short="SAT AT", drop=2), Col("PER S", drop=2),
         Col("HANDLER", drop=2), "DECISION", text("REASON")],
        [[age(f.at - a.at), f"{a.host}:{a.pid}", a.workers, a.desired,
          f"{a.minimum}-{a.maximum}", "-" if a.ceiling is None else a.ceiling,
          "-" if a.throughput is None else f"{a.throughput:.2f}", _secs(a.handler_time),
          a.decision, a.reason] for a in f.decisions],
        title=f"autoscale decisions ({f.queue})")


def stats_view(found: list[QueueFigures]) -> RenderableType:
    """One queue as a list of figures and its priorities; several as one row each."""
    if len(found) == 1:
        f = found[0]
        s, r = f.stats, f.rates
        rows: list[list[Any]] = [
            ["ready", s.ready], ["scheduled", s.scheduled], ["in flight", s.in_flight],
            ["blocked", s.blocked], ["dead", s.dead], ["backlog", s.backlog],
            ["oldest ready", age(s.oldest_ready_age)],
            *[[c.replace("_", " "), getattr(s, c)] for c in COUNTERS],
            ["sent per s (1m / 5m)", f"{_rate(r.sent_1m)} / {_rate(r.sent_5m)}"
             + _span(r.span_1m, 60.0)],
            ["acked per s (1m / 5m)", f"{_rate(r.acked_1m)} / {_rate(r.acked_5m)}"],
            ["dead-lettered per s (1m / 5m)",
             f"{_rate(r.dead_lettered_1m)} / {_rate(r.dead_lettered_5m)}"],
            ["workers", f"{f.workers} x {f.concurrency} slot(s)"],
            ["handler time (mean)", _secs(f.handler_time)],
            ["desired workers", f.desired_workers],
            ["parked keys", ", ".join(s.parked_keys) or "-"],
            ["paused", "yes" if s.paused else "no"],
        ]
        parts = [make_table(["FIGURE", text("VALUE")], rows, title=f"queue {s.queue}"),
                 priority_view(f)]
        if f.decisions:
            parts.append(autoscale_view(f))
        return Group(*parts)
    table = make_table(
        [key("QUEUE"), "READY", Col("SCHEDULED", short="SCHED", drop=3),
         Col("IN FLIGHT", short="FLIGHT"), Col("BLOCKED", short="BLOCK", drop=3), "DEAD",
         Col("OLDEST", drop=1), *[Col(c.replace("_", " ").upper(), short=short, drop=drop)
                     for c, short, drop in zip(COUNTERS, COUNTER_SHORT, COUNTER_DROP,
                                               strict=True)],
         Col("SENT/S", drop=1), Col("ACKED/S", drop=1), Col("WORKERS", short="WRK", drop=1),
         Col("DESIRED", short="DES", drop=2),
         text("PARKED KEYS", short="PARKED", drop=6)],
        [[f.queue, f.stats.ready, f.stats.scheduled, f.stats.in_flight, f.stats.blocked,
          f.stats.dead, age(f.stats.oldest_ready_age), *[getattr(f.stats, c) for c in COUNTERS],
          _rate(f.rates.sent_1m), _rate(f.rates.acked_1m), f.workers, f.desired_workers,
          ", ".join(f.stats.parked_keys) or "-"] for f in found],
        empty="no queues yet")
    last = [(f, a) for f in found for a in f.autoscalers]
    if not last:
        return table
    return Group(table, make_table(
        [key("QUEUE"), key("AUTOSCALER"), "AGE", Col("WORKERS", short="WRK"),
         Col("DESIRED", short="DES"), Col("SATURATED AT", short="SAT AT", drop=2),
         "DECISION", text("REASON")],
        [[f.queue, f"{a.host}:{a.pid}", age(f.at - a.at), a.workers, a.desired,
          "-" if a.ceiling is None else a.ceiling, a.decision, a.reason] for f, a in last],
        title="autoscalers (each one's last decision)"))


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
            [key("ID"), "STATE", Col("PRIORITY", short="PRIO"), key("KEY", drop=1),
             Col("ATTEMPT", short="ATT"), "AGE", Col("DUE IN", drop=2), text("BODY")],
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
