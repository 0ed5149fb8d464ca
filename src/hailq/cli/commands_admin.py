"""The broker itself: ``hailq workers`` and ``hailq migrate``."""

from __future__ import annotations

import click

import hailq
from hailq.cli.context import common_options, current_app
from hailq.cli.output import age, record

# A worker reports itself every few seconds; one silent for longer has died.
DEAD_AFTER = 15.0
STOPPED = "stopped"  # what a worker records as it shuts down cleanly (runtime/registry.py)


@click.command("workers")
@common_options
def workers() -> None:
    """List the worker processes with their queues and in-flight messages.

    STATUS is what the worker last recorded: running, draining (stopping,
    finishing what it holds) or stopped (it shut down cleanly; it holds
    nothing). A worker that has not stopped and was not heard from for more
    than 15 seconds (by the database's clock) is shown as dead: it was
    killed, or its machine or network went away. Its leased messages return
    to their queues when their leases end. With --json, "alive" is true for
    a running or draining worker heard from in time.
    """
    app = current_app()
    with app.broker() as broker:
        found = broker.workers()
        now = broker.now()
    found.sort(key=lambda w: (w.host, w.pid, w.id))
    if app.out.json:
        app.out.emit_json([{**record(w), "status": worker_status(w, now),
                            "alive": worker_status(w, now) in ("running", "draining"),
                            "last_seen_age": max(now - w.last_seen, 0.0)} for w in found])
        return
    app.out.table(
        ["ID", "HOST", "PID", "QUEUES", "IN FLIGHT", "SINCE", "LAST SEEN", "STATUS"],
        [[w.id, w.host, w.pid, ", ".join(w.queues), f"{w.in_flight}/{w.concurrency}",
          age(now - w.started_at), age(now - w.last_seen) + " ago",
          worker_status(w, now)] for w in found],
        empty="no workers have reported; start one with 'hailq worker'")


def worker_status(worker: hailq.WorkerInfo, now: float) -> str:
    """``stopped`` once recorded (a stopped worker no longer reports, so its silence
    says nothing), ``dead`` for any other state gone silent, else the state itself."""
    if worker.state == STOPPED:
        return STOPPED
    return "dead" if now - worker.last_seen > DEAD_AFTER else worker.state


@click.command("migrate")
@common_options
def migrate() -> None:
    """Create or upgrade hailq's schema in the database and print its version.

    Safe to run again: an up-to-date schema is left as it is.
    """
    app = current_app()
    with app.broker(create=True) as broker:
        version = broker.migrate()
        url = broker.url
    if app.out.json:
        app.out.emit_json({"url": url, "schema_version": version})
    else:
        app.out.line(f"schema version {version} at {url}")


COMMANDS = [workers, migrate]
