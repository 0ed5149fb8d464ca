"""The broker itself: ``hailq workers``, ``hailq maintain`` and ``hailq migrate``."""

from __future__ import annotations

import click

import hailq
from hailq.cli.context import Finite, common_options, current_app
from hailq.cli.output import Col, age, key, record, text

# A worker reports itself every few seconds; one silent for longer has died.
DEAD_AFTER = 15.0
STOPPED = "stopped"  # what a worker records as it shuts down cleanly (runtime/registry.py)
FORGET_AFTER = 86400.0  # a day: long enough to see what happened overnight


@click.command("workers")
@common_options
def workers() -> None:
    """List the worker processes with their queues and in-flight messages, then what
    each live worker's slots run now (as of its last report, every few seconds).

    STATUS is what the worker last recorded: running, draining (stopping,
    finishing what it holds) or stopped (it shut down cleanly; it holds
    nothing). A worker that has not stopped and was not heard from for more
    than 15 seconds (by the database's clock) is shown as dead: it was
    killed, or its machine or network went away. Its leased messages return
    to their queues when their leases end. With --json, "alive" is true for
    a running or draining worker heard from in time.

    Only reads: workers long gone stay listed until 'hailq maintain' forgets
    them.
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
        [key("ID"), key("HOST", drop=3), Col("PID", drop=3), text("QUEUES", drop=1),
         Col("IN FLIGHT", short="FLIGHT"), Col("SINCE", drop=2),
         Col("LAST SEEN", short="SEEN"), "STATUS"],
        [[w.id, w.host, w.pid, ", ".join(w.queues), f"{w.in_flight}/{w.concurrency}",
          age(now - w.started_at), age(now - w.last_seen) + " ago",
          worker_status(w, now)] for w in found],
        empty="no workers have reported; start one with 'hailq worker'")
    running = [(w, r) for w in found if worker_status(w, now) in ("running", "draining")
               for r in w.running]
    if running:
        app.out.line("")
        app.out.table(
            [key("WORKER", drop=2), key("QUEUE"), key("MESSAGE"), Col("ATTEMPT", drop=1),
             "FOR"],
            [[w.id, r.queue, r.message_id, r.attempt, age(max(now - r.since, 0.0))]
             for w, r in running], title="running now")


def worker_status(worker: hailq.WorkerInfo, now: float) -> str:
    """``stopped`` once recorded (a stopped worker no longer reports, so its silence
    says nothing), ``dead`` for any other state gone silent, else the state itself."""
    if worker.state == STOPPED:
        return STOPPED
    return "dead" if now - worker.last_seen > DEAD_AFTER else worker.state


@click.command("maintain")
@click.option("--forget-workers-after", type=Finite(min=DEAD_AFTER), default=FORGET_AFTER,
              show_default=True, metavar="SECONDS",
              help=f"Forget workers not heard from for this long (at least {DEAD_AFTER:g}: "
                   "a shorter time would forget running ones between two reports).")
@common_options
def maintain(forget_workers_after: float) -> None:
    """Do the upkeep consumers do as they receive, for every queue, and forget workers
    long silent.

    Messages whose delay or retry backoff is over become ready; a message
    whose lease ended goes back to its queue, or becomes dead after its last
    attempt; workers not heard from for --forget-workers-after seconds (by the
    database's clock) leave 'hailq workers'.

    Optional: consumers and workers do the queue upkeep as they receive, and
    the commands that look (queues, stats, peek, dead, workers) never write.
    Run it on a queue nobody consumes before reading its figures, or from a
    timer to keep the list of workers short. It writes, but never creates a
    database or schema: 'hailq migrate' does.
    """
    app = current_app()
    with app.broker() as broker:
        queues = len(broker.queues())
        before = {w.id for w in broker.workers()}
        broker.maintain(forget_workers_after)
        # A worker that registered meanwhile is not in ``before``: only the pruned are.
        forgotten = len(before - {w.id for w in broker.workers()})
        url = broker.url
    if app.out.json:
        app.out.emit_json({"url": url, "queues": queues, "workers_forgotten": forgotten,
                           "forget_workers_after": forget_workers_after})
    else:
        app.out.line(f"maintained {queues} queue{'' if queues == 1 else 's'} at {url}; "
                     f"forgot {forgotten} worker{'' if forgotten == 1 else 's'} silent for "
                     f"more than {age(forget_workers_after)}")


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


COMMANDS = [workers, maintain, migrate]
