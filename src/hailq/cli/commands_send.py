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
@click.option("--skip", type=click.IntRange(min=0), default=0, metavar="N",
              help="With --file: leave out the first N lines (resume where an interrupted "
                   "send stopped: it says which N).")
@click.option("--create", is_flag=True,
              help="Create the queue (and a new SQLite database or hailq schema) if missing.")
@common_options
def send(queue_name: str, body: str | None, priority: int, ordering_key: str | None,
         delay: float, dedup_id: str | None, headers: list[tuple[str, str]], as_text: bool,
         raw: bool, source: IO[str] | None, envelopes: bool, batch_size: int, skip: int,
         create: bool) -> None:
    """Send BODY (or every line of --file) to QUEUE.

    QUEUE must exist (declared by code, or created by an earlier --create): a
    mistyped queue name is refused as bad input (exit 2), a mistyped database
    (no such SQLite file or hailq schema) as a failure (exit 1), rather than
    either being silently made.
    With --create a missing queue, SQLite file or hailq schema is created.

    Prints the new message id (with --file, how many were sent). A --dedup-id
    seen within the queue's dedup window prints the first message's id. Ctrl-C
    during --file says how many lines were committed and the --skip that resumes
    after them.
    """
    app = current_app()
    if (body is None) == (source is None):
        raise click.UsageError("give either BODY or --file, not both or neither")
    if skip and source is None:
        raise click.UsageError("--skip only goes with --file")
    if source is None:
        if envelopes:
            raise click.UsageError("--envelopes only goes with --file")
        message = envelope(read_body(str(body), raw=raw, as_text=as_text), priority,
                           ordering_key, delay, headers, dedup_id)
        with app.broker(create=create) as broker:
            queue = _declare_checked(broker, queue_name, [(0, message)], create)
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
        lines = [(n, e) for n, e in read_lines(source, envelopes=envelopes, raw=raw,
                                               as_text=as_text, defaults=defaults)
                 if n > skip]
    except UnicodeDecodeError as exc:
        raise click.UsageError(f"--file is not UTF-8 text ({exc.reason})") from None
    except KeyboardInterrupt:
        raise _interrupted_before(skip) from None
    with app.broker(create=create) as broker:
        try:
            queue = _declare_checked(broker, queue_name, lines, create)
        except KeyboardInterrupt:
            raise _interrupted_before(skip) from None
        ids = _send_batches(app.out, queue, lines, batch_size, skip)
    if app.out.json:
        app.out.emit_json({"queue": queue_name, "sent": len(ids), "ids": ids})
    else:
        app.out.line(f"sent {len(ids)} message(s) to {queue_name}")


def _declare_checked(broker: hailq.Broker, name: str,
                     messages: Sequence[tuple[int, hailq.Envelope]],
                     create: bool) -> hailq.Queue:
    """Check every message against the queue's settings, then (with ``create``) declare
    the queue if new.

    Checking first means a bad message declares nothing and sends nothing.
    """
    try:
        existing: hailq.Queue | None = broker.get_queue(name)
    except hailq.QueueNotFound:
        if not create:
            raise UnknownQueue(
                f"no queue named {name!r} at {broker.url}; declare it in code with "
                "broker.queue(), or pass --create to create it ('hailq queues' lists "
                "them)") from None
        existing = None
    for number, message in messages:
        try:
            build_message(name, message, broker.now)
        except hailq.InvalidArgument as exc:
            where = f"line {number}: " if number else ""
            raise hailq.InvalidArgument(f"{where}{exc}; nothing was sent") from None
    return existing or broker.queue(name)


class UnknownQueue(click.ClickException):
    """``send`` to a queue that does not exist, without ``--create``: bad input (a typo
    must not make a queue), refused before anything is written."""

    exit_code = 2


class Interrupted(click.ClickException):
    """Ctrl-C during ``send --file``: what was committed, and how to go on."""

    exit_code = 130


def _interrupted_before(skip: int) -> Interrupted:
    """Ctrl-C while the file was read and checked: nothing of it was sent yet."""
    again = f" with --skip {skip}" if skip else ""
    return Interrupted(f"interrupted while reading and checking the file: 0 message(s) "
                       f"committed, nothing was sent; run the same command{again} again")


def _send_batches(out: Output, queue: hailq.Queue,
                  lines: list[tuple[int, hailq.Envelope]], batch_size: int,
                  skip: int) -> list[str]:
    ids: list[str] = []
    done = skip  # the last line number whose message is committed (or skipped)
    sending: list[tuple[int, hailq.Envelope]] = []  # the batch on its way, if any
    try:
        with out.progress(len(lines), f"sending to {queue.name}") as advance:
            for start in range(0, len(lines), batch_size):
                sending = lines[start:start + batch_size]
                try:
                    ids.extend(queue.send_many([e for _, e in sending]))
                except hailq.HailqError as exc:
                    raise click.ClickException(
                        f"{exc}; {len(ids)} of {len(lines)} message(s) were sent before "
                        f"this batch failed, the rest were not; resume with --skip {done}"
                    ) from None
                count, done, sending = len(sending), sending[-1][0], []
                advance(count)
    except KeyboardInterrupt:
        # A batch is atomic: one interrupted is all in or all out, and which only the
        # database knows (Ctrl-C may land just after its commit).
        unsure = (f"; the batch of lines {sending[0][0]}-{sending[-1][0]} was being sent "
                  "and may or may not be in (a dedup_id per line, with --envelopes, makes "
                  "resending it harmless)") if sending else ""
        raise Interrupted(
            f"interrupted: {len(ids)} of {len(lines)} message(s) committed, lines up to "
            f"{done} of the file{unsure}; resume with --skip {done}") from None
    return ids


COMMANDS = [send]
