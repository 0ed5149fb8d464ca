"""History of finished messages (rule 40): ``hailq history``."""

from __future__ import annotations

import click

from hailq.cli.context import common_options, current_app
from hailq.cli.output import Col, age, key, preview, text
from hailq.errors import InvalidArgument
from hailq.history import MAX_LIMIT, OUTCOMES, HistoryEntry, moment


@click.command("history")
@click.argument("queue_name", metavar="[QUEUE]", required=False)
@click.option("--id", "message_id", metavar="ID", help="Only the message with this id.")
@click.option("--dedup-id", metavar="ID", help="Only messages sent with this dedup id.")
@click.option("--header", metavar="NAME=VALUE",
              help="Only messages whose header NAME has this value (a business id).")
@click.option("--ordering-key", "-k", metavar="KEY", help="Only messages of this key.")
@click.option("--outcome", type=click.Choice(OUTCOMES), help="Only acked, dead or "
              "cancelled messages.")
@click.option("--since", metavar="WHEN", help='Finished at or after WHEN: a duration ago '
              '("24h"), an ISO time or epoch seconds.')
@click.option("--until", metavar="WHEN", help="Finished before WHEN (as --since).")
@click.option("--limit", "-n", type=click.IntRange(1, MAX_LIMIT), default=50,
              show_default=True, help="Show at most this many, newest first.")
@common_options
def history(queue_name: str | None, message_id: str | None, dedup_id: str | None,
            header: str | None, ordering_key: str | None, outcome: str | None,
            since: str | None, until: str | None, limit: int) -> None:
    """Finished messages (acked, dead, cancelled) of QUEUE, or of every queue, that
    queues with a `retain` setting keep: newest first, with attempts, handler time
    and the consumer of the last attempt.

    With --json each message carries its body and every attempt (error, consumer,
    start, end, handler time). Only queues declared or configured with retain
    (e.g. `hailq configure QUEUE retain=24h`) keep history.
    """
    app = current_app()
    pair = None
    if header is not None:
        name, sep, value = header.partition("=")
        if not sep or not name:
            raise InvalidArgument(f"--header must be NAME=VALUE, got {header!r}")
        pair = (name, value)
    with app.broker() as broker:
        if queue_name is not None:
            app.queue(broker, queue_name)  # a typo is QueueNotFound, not an empty list
        now = broker.now()
        found = broker.history(
            queue=queue_name, id=message_id, dedup_id=dedup_id, header=pair,
            ordering_key=ordering_key, outcome=outcome,
            since=None if since is None else moment(since, now),
            until=None if until is None else moment(until, now), limit=limit)
    if app.out.json:
        app.out.emit_json([e.to_json() for e in found])
        return
    app.out.table(
        [key("ID"), key("QUEUE", drop=2), Col("OUTCOME"), "FINISHED",
         Col("ATTEMPTS", short="ATT"), "HANDLER", text("CONSUMER", drop=1),
         key("KEY", drop=3), text("BODY", drop=4)],
        [_row(e, now) for e in found],
        title="history" + (f" of {queue_name}" if queue_name else ""),
        empty="no finished messages match (only queues with retain keep history)")


def _row(e: HistoryEntry, now: float) -> list[str | int]:
    handler = e.handler_time
    return [e.id, e.queue, e.outcome, age(now - e.finished_at) + " ago", len(e.attempts),
            "-" if handler is None else f"{handler:.3f}s", e.consumer or "-",
            e.ordering_key or "-", "(not kept)" if e.body is None else preview(e.body, 40)]


COMMANDS = [history]
