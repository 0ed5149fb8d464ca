"""``hailq send``: one message from the command line, or many from a JSONL file."""

from __future__ import annotations

from collections.abc import Sequence
from typing import IO

import click

import hailq
from hailq.cli.context import check_queue_name, common_options, current_app
from hailq.cli.output import Output
from hailq.cli.sending import BODY_HELP, envelope, message_options, read_body, read_lines
from hailq.queue import MAX_BATCH, build_message
from hailq.settings import QueueSettings

DEFAULT_BATCH = 500

FILE_HELP = """With --file, each line of the file ('-' for standard input) is one message:
a JSON body, or with --envelopes an object {"body": ..., "priority": 3,
"ordering_key": "k", "delay": 10, "headers": {"a": "b"}, "dedup_id": "x"} whose
fields override the command-line options (headers are merged). Every line is
checked before the first is sent; then they go in atomic batches of
--batch-size, with a progress bar on a terminal."""


@click.command("send", epilog="\b\n" + BODY_HELP + "\n\n\b\n" + FILE_HELP)
@click.argument("queue_name", metavar="QUEUE", callback=check_queue_name)
@click.argument("body", required=False)
@message_options
@click.option("--file", "source", type=click.File("r", encoding="utf-8"), metavar="PATH",
              help="Send every line of a JSONL file instead of BODY.")
@click.option("--envelopes", is_flag=True,
              help="With --file: each line is an object with a body and its own options.")
@click.option("--batch-size", type=click.IntRange(1, MAX_BATCH), default=DEFAULT_BATCH,
              show_default=True, help="With --file: messages per atomic batch.")
@common_options
def send(queue_name: str, body: str | None, priority: int, ordering_key: str | None,
         delay: float, dedup_id: str | None, headers: list[tuple[str, str]], as_text: bool,
         raw: bool, source: IO[str] | None, envelopes: bool, batch_size: int) -> None:
    """Send BODY (or every line of --file) to QUEUE, declaring the queue if needed.

    Prints the new message id (with --file, how many were sent). A --dedup-id
    seen within the queue's dedup window prints the first message's id.
    """
    app = current_app()
    if (body is None) == (source is None):
        raise click.UsageError("give either BODY or --file, not both or neither")
    if source is None:
        if envelopes:
            raise click.UsageError("--envelopes only goes with --file")
        message = envelope(read_body(str(body), raw=raw, as_text=as_text), priority,
                           ordering_key, delay, headers, dedup_id)
        with app.broker(create=True) as broker:
            queue = _declare_checked(broker, queue_name, [(0, message)])
            message_id = queue.send_many([message])[0]
        if app.out.json:
            app.out.emit_json({"queue": queue_name, "id": message_id})
        else:
            app.out.line(message_id)
        return
    if dedup_id is not None:
        raise click.UsageError("--dedup-id would make every line a duplicate of the first; "
                               "use --envelopes with a dedup_id per line")
    if envelopes and (raw or as_text):
        raise click.UsageError("--envelopes lines are JSON objects; --raw and --text do not apply")
    defaults = envelope(None, priority, ordering_key, delay, headers, None)
    try:
        lines = read_lines(source, envelopes=envelopes, raw=raw, as_text=as_text,
                           defaults=defaults)
    except UnicodeDecodeError as exc:
        raise click.UsageError(f"--file is not UTF-8 text ({exc.reason})") from None
    with app.broker(create=True) as broker:
        queue = _declare_checked(broker, queue_name, lines)
        ids = _send_batches(app.out, queue, [e for _, e in lines], batch_size)
    if app.out.json:
        app.out.emit_json({"queue": queue_name, "sent": len(ids), "ids": ids})
    else:
        app.out.line(f"sent {len(ids)} message(s) to {queue_name}")


def _declare_checked(broker: hailq.Broker, name: str,
                     messages: Sequence[tuple[int, hailq.Envelope]]) -> hailq.Queue:
    """Check every message against the queue's settings, then declare the queue if new.

    Checking first means a bad message declares nothing and sends nothing.
    """
    try:
        existing: hailq.Queue | None = broker.get_queue(name)
    except hailq.QueueNotFound:
        existing = None
    settings = existing.settings if existing else QueueSettings()
    for number, message in messages:
        try:
            build_message(name, settings, message, broker.now)
        except hailq.InvalidArgument as exc:
            where = f"line {number}: " if number else ""
            raise hailq.InvalidArgument(f"{where}{exc}; nothing was sent") from None
    return existing or broker.queue(name)


def _send_batches(out: Output, queue: hailq.Queue, messages: list[hailq.Envelope],
                  batch_size: int) -> list[str]:
    ids: list[str] = []
    with out.progress(len(messages), f"sending to {queue.name}") as advance:
        for start in range(0, len(messages), batch_size):
            batch = messages[start:start + batch_size]
            try:
                ids.extend(queue.send_many(batch))
            except hailq.HailqError as exc:
                raise click.ClickException(
                    f"{exc}; {len(ids)} of {len(messages)} message(s) were sent before this "
                    f"batch failed, the rest were not") from None
            advance(len(batch))
    return ids


COMMANDS = [send]
