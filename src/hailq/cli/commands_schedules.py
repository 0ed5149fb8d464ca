"""Periodic messages (SPEC rule 35): ``hailq schedules`` and ``hailq scheduler``."""

from __future__ import annotations

import logging
import signal
import threading
from datetime import UTC, datetime
from typing import Any

import click

import hailq
from hailq.cli.context import Finite, common_options, current_app, log_options
from hailq.cli.output import Col, age, key, preview, record, text
from hailq.runtime import logs

NOT_DECLARED = "not declared by any running worker"


def _when(slot: float | None) -> str:
    if slot is None:
        return "-"
    return datetime.fromtimestamp(slot, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _status(s: hailq.ScheduleInfo) -> str:
    if s.paused:
        return "paused"
    return "active" if s.declared else NOT_DECLARED


@click.group("schedules", invoke_without_command=True)
@common_options
@click.pass_context
def schedules(ctx: click.Context) -> None:
    """List periodic schedules; pause, resume or remove one.

    Without a subcommand, lists every stored schedule: its timing, queue, the
    last slot sent, the next one, how many messages it sent, and its status:
    active, paused, or "not declared by any running worker" (an app.periodic
    schedule whose declaration left the code, or whose workers all stopped:
    kept with its last slot but not sent until a worker declares it again or
    it is removed). Only reads.
    """
    if ctx.invoked_subcommand is not None:
        return
    app = current_app()
    with app.broker() as broker:
        found = broker.schedules()
        now = broker.now()
    if app.out.json:
        app.out.emit_json([{**record(s), "status": _status(s)} for s in found])
        return
    rows: list[list[Any]] = [
        [s.name, s.cron if s.cron is not None else f"every {s.every:g}s", s.timezone,
         s.queue, preview(s.body, 30), _when(s.last_slot if s.fired else None),
         _when(s.next_slot), s.fired, age(now - s.created_at), _status(s)] for s in found]
    app.out.table([key("NAME"), "WHEN", Col("ZONE", drop=2), key("QUEUE"),
                   text("BODY", drop=4), Col("LAST SENT", drop=3), "NEXT", "SENT",
                   Col("AGE", drop=1), text("STATUS")], rows,
                  empty="no schedules; declare one with app.periodic(...) or "
                        "broker.schedule(...)")


def _change(verb: str, name: str) -> None:
    app = current_app()
    with app.broker() as broker:
        try:
            getattr(broker, f"{verb}_schedule")(name)
        except hailq.ScheduleNotFound:
            raise click.ClickException(
                f"no schedule named {name!r} at {broker.url}; 'hailq schedules' lists "
                "them") from None
    if app.out.json:
        app.out.emit_json({"schedule": name, "done": verb})
    else:
        app.out.line(f"schedule {name!r}: {verb}d" if verb != "pause" else
                     f"schedule {name!r}: paused")  # resumed, deleted


@schedules.command("pause")
@click.argument("name")
@common_options
def pause(name: str) -> None:
    """Stop sending NAME's slots (for every scheduler) until resumed."""
    _change("pause", name)


@schedules.command("resume")
@click.argument("name")
@common_options
def resume(name: str) -> None:
    """Send NAME's slots again from now on; the slots of the pause are skipped."""
    _change("resume", name)


@schedules.command("delete")
@click.argument("name")
@common_options
def delete(name: str) -> None:
    """Forget NAME. A worker whose app still declares it stores it again (as new)
    when it starts: remove the declaration from the code first."""
    _change("delete", name)


@schedules.command("remove", hidden=True, deprecated=True)
@click.argument("name")
@common_options
def remove(name: str) -> None:
    """Deprecated: 'hailq schedules delete' (this name goes in the next release)."""
    _change("delete", name)


@click.command("scheduler")
@click.argument("target", required=False)
@click.option("--tick", type=Finite(0.05, 60), default=1.0, show_default=True,
              help="Seconds between looks for schedules that others added or changed.")
@click.option("--log-level", type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"],
                                               case_sensitive=False),
              default="INFO", show_default=True)
@log_options
def scheduler(target: str | None, tick: float, log_level: str) -> int:
    """Run a scheduler alone, for setups without workers, until SIGTERM or SIGINT.

    It sends the due slots of every stored schedule (broker.schedule's, and
    app.periodic's while some worker or scheduler declares them) and, with
    TARGET (module:app), declares that app's periodic schedules. Any number
    of schedulers and workers may run: each slot is sent once.
    """
    from hailq.runtime.app import App, load_target
    from hailq.runtime.scheduler import Scheduler

    periodics = []
    if target is not None:
        loaded = load_target(target)
        if not isinstance(loaded, App):
            raise click.BadParameter("TARGET must name an App (module:app)",
                                     param_hint="TARGET")
        periodics = loaded.periodics
    app = current_app()
    logs.configure(log_level.upper(), json_lines=app.out.json)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    with app.broker(create=True) as broker:
        service = Scheduler(broker, periodics, tick=tick)
        logging.getLogger("hailq.scheduler").info(
            "scheduler at %s declaring %d schedule(s)", broker.url, len(periodics))
        service.start()
        try:
            while not stop.wait(0.2):
                pass
        finally:
            service.close()
    return 0


COMMANDS = [schedules, scheduler]
