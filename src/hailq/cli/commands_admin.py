"""The broker itself: ``hailq workers`` and ``hailq migrate``."""

from __future__ import annotations

import click

from hailq.cli.context import common_options, current_app
from hailq.cli.output import age, record

# A worker reports itself every few seconds; one silent for longer has died.
DEAD_AFTER = 15.0


@click.command("workers")
@common_options
def workers() -> None:
    """List the worker processes with their queues and in-flight messages.

    A worker not heard from for more than 15 seconds (by the database's clock)
    is shown as dead: it was killed, or its machine or network went away. Its
    leased messages return to their queues when their leases end.
    """
    app = current_app()
    with app.broker() as broker:
        found = broker.workers()
        now = broker.now()
    found.sort(key=lambda w: (w.host, w.pid, w.id))

    def status(last_seen: float, state: str) -> str:
        return "dead" if now - last_seen > DEAD_AFTER else state

    if app.out.json:
        app.out.emit_json([{**record(w), "status": status(w.last_seen, w.state),
                            "alive": now - w.last_seen <= DEAD_AFTER,
                            "last_seen_age": max(now - w.last_seen, 0.0)} for w in found])
        return
    app.out.table(
        ["ID", "HOST", "PID", "QUEUES", "IN FLIGHT", "SINCE", "LAST SEEN", "STATUS"],
        [[w.id, w.host, w.pid, ", ".join(w.queues), f"{w.in_flight}/{w.concurrency}",
          age(now - w.started_at), age(now - w.last_seen) + " ago",
          status(w.last_seen, w.state)] for w in found],
        empty="no workers have reported; start one with 'hailq worker'")


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
