"""The dead-letter queue and clean-up: ``hailq dead``, ``hailq redrive``, ``hailq purge``."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Callable
from typing import Any, TypeVar

import click

import hailq
from hailq.cli.context import Finite, check_id, check_queue_name, common_options, current_app
from hailq.cli.output import Col, Output, age, clean, key, preview, record, text
from hailq.models import AttemptError
from hailq.tracebacks import ErrorGroup, distinct, folded_lines, group_dead, signature

F = TypeVar("F", bound=Callable[..., Any])
MAX_LIMIT = 100_000
LIST_LIMIT = 100  # hailq dead lists this many by default
GROUP_LIMIT = 10_000  # hailq dead --group reads this many by default


def filter_options(default_limit: int | None) -> Callable[[F], F]:
    """The dead-letter filters shared by ``dead`` and ``redrive``."""
    def decorate(f: F) -> F:
        for option in reversed([
            click.option("--grep", metavar="TEXT",
                         help="Only messages with TEXT in the error of any attempt."),
            click.option("--older-than", type=Finite(min=0), metavar="SECONDS",
                         help="Only messages dead for more than SECONDS."),
            click.option("--ordering-key", "-k", metavar="KEY",
                         help="Only messages with this ordering key."),
            click.option("--limit", "-n", type=click.IntRange(1, MAX_LIMIT),
                         default=default_limit, show_default=default_limit is not None,
                         help="Consider at most this many, oldest death first."),
        ]):
            f = option(f)
        return f
    return decorate


@click.command("dead")
@click.argument("queue_name", metavar="QUEUE", callback=check_queue_name)
@filter_options(default_limit=None)
@click.option("--group", "grouped", is_flag=True,
              help="One row per error (each message's last error: a traceback's "
                   "exception line, else its last line): how many died of it, first and "
                   "last seen, one example id.")
@common_options
def dead(queue_name: str, grep: str | None, older_than: float | None,
         ordering_key: str | None, limit: int | None, grouped: bool) -> None:
    """List the dead messages of QUEUE, oldest death first, with attempts and last error.

    With --json every message carries the error of each attempt.
    "(parked)" after the key marks a message that holds its ordering key
    (on_dead="park") until it is redriven or purged. --limit defaults to 100
    (with --group, 10,000 are read and grouped). When more than --limit are
    dead (or match the filters), a note on stderr says so.
    """
    app = current_app()
    limit = limit or (GROUP_LIMIT if grouped else LIST_LIMIT)
    filtered = grep is not None or older_than is not None or ordering_key is not None
    with app.broker() as broker:
        queue = app.queue(broker, queue_name)
        # A filtered list is not counted; one row more than --limit tells whether more match.
        asked = min(limit + 1, MAX_LIMIT) if filtered else limit
        letters = queue.dead_letters(error_contains=grep, older_than=older_than,
                                     ordering_key=ordering_key, limit=asked)
        total = _dead_total(queue, letters, limit, filtered)
        letters = letters[:limit]
        now = broker.now()
    if grouped:
        _groups(app.out, group_dead(letters), queue_name, now)
    elif app.out.json:
        app.out.emit_json([{**record(d), "last_error": d.last_error} for d in letters])
    else:
        app.out.table(
            [key("ID"), key("KEY", drop=1), Col("ATTEMPTS", short="ATT"), "DIED",
             text("LAST ERROR"), text("BODY", drop=2)],
            [[d.id, (d.ordering_key or "-") + (" (parked)" if d.parked else ""), d.attempt,
              age(now - d.dead_at) + " ago", _error(d.last_error), preview(d.body, 40)]
             for d in letters],
            title=f"dead letters of {queue_name}", empty="no dead messages")
    what = f"dead letters of {queue_name}" + (" that match" if filtered else "")
    if grouped:
        what = "the oldest " + what + " (the groups count only those)"
    if filtered and len(letters) == MAX_LIMIT:  # no row beyond the most can be asked for
        app.out.note(f"showing {MAX_LIMIT:,} {what}; there may be more: --limit "
                     f"{MAX_LIMIT:,} is the most, narrow the filters to see the rest")
        return
    app.out.note_cut_short(len(letters), total, what, limit=limit, most=MAX_LIMIT)


def _groups(out: Output, groups: list[ErrorGroup], queue_name: str, now: float) -> None:
    if out.json:
        out.emit_json([{"error": g.signature, "count": g.count, "first_seen": g.first_seen,
                        "last_seen": g.last_seen, "example_id": g.example_id,
                        "example_error": g.example_error} for g in groups])
        return
    out.table(["COUNT", "ERROR", "FIRST SEEN", "LAST SEEN", "EXAMPLE"],
              [[g.count, _error(g.signature), age(now - g.first_seen) + " ago",
                age(now - g.last_seen) + " ago", g.example_id] for g in groups],
              title=f"dead letters of {queue_name} by error", empty="no dead messages")


def print_errors(out: Output, errors: list[AttemptError], now: float) -> None:
    """Each distinct error once, under the attempts that had it, as lines (a traceback's
    own line breaks kept, hailq's frames folded); control characters escaped."""
    if not errors:
        return
    found = distinct(errors)
    out.line(f"errors: {len(errors)} attempt(s), {len(found)} distinct")
    for e in found:
        first, last = age(now - e.first_at), age(now - e.last_at)
        when = f"{last} ago" if first == last else f"{first} to {last} ago"
        out.line(f"attempt {e.attempts_text} ({when}):")
        for line in folded_lines(e.error):
            # Wrapped to the terminal, continuation indented: a line never runs past it.
            for part in textwrap.wrap(clean(line), width=max(out.console.width, 40),
                                      initial_indent="  ", subsequent_indent="      ",
                                      break_on_hyphens=False, drop_whitespace=False) or [""]:
                out.line(part.rstrip())


def _dead_total(queue: hailq.Queue, letters: list[hailq.DeadMessage], limit: int,
                filtered: bool) -> int | None:
    """How many dead letters there are; None if only known to be more than ``limit``."""
    if len(letters) < limit:
        return len(letters)
    if filtered:
        return None if len(letters) > limit else limit
    return max(queue.stats().dead, len(letters))


def _error(text: str | None, length: int = 80) -> str:
    """An error's one line for a table: a traceback's exception line, else the last."""
    if not text:
        return "-"
    line = clean(signature(text) if text.strip() else text)
    return line if len(line) <= length else line[:length - 1] + "…"


@click.command("redrive")
@click.argument("queue_name", metavar="QUEUE", callback=check_queue_name)
@click.option("--id", "ids", multiple=True, metavar="ID", callback=check_id,
              help="Redrive this message; repeat for more. Without --id and filters: every "
                   "dead message. An ID that is not a message id is bad input (exit 2).")
@filter_options(default_limit=None)
@click.option("--dry-run", is_flag=True, help="List what would be redriven and change nothing.")
@common_options
def redrive(queue_name: str, ids: tuple[str, ...], grep: str | None, older_than: float | None,
            ordering_key: str | None, limit: int | None, dry_run: bool) -> None:
    """Return dead messages of QUEUE to ready with attempt 0, keeping ordering-key order.

    Choose them with --id and/or the same filters as 'hailq dead'. Without
    --limit, every dead message (or every one that matches, up to 100,000 at a
    time); with it, the oldest deaths first. When more are left dead than were
    redriven, a note on stderr says so: run the command again for the rest.
    """
    app = current_app()
    filtered = grep is not None or older_than is not None or ordering_key is not None
    everything = not (ids or filtered or limit is not None or dry_run)
    most = MAX_LIMIT if limit is None else limit
    with app.broker() as broker:
        queue = app.queue(broker, queue_name)
        if everything:  # one statement, however many there are
            letters, more, found = [], False, set()
            count = queue.redrive()
        else:
            def matching(n: int) -> list[hailq.DeadMessage]:
                return queue.dead_letters(error_contains=grep, older_than=older_than,
                                          ordering_key=ordering_key, limit=n)

            # One row beyond the limit tells a dry run whether more would be left behind.
            # Named ids are looked for among all the dead (as far as a list reaches), not
            # only the oldest --limit.
            letters = matching(MAX_LIMIT if ids else min(most + 1, MAX_LIMIT))
            more = len(letters) > most or len(letters) == MAX_LIMIT
            if ids:
                wanted = set(ids)
                letters = [d for d in letters if d.id in wanted]
            found = {d.id for d in letters}  # named ids beyond --limit are dead, not missing
            more_named = len(letters) > most
            letters = letters[:most]
            chosen = [d.id for d in letters]
            count = len(chosen) if dry_run or not chosen else queue.redrive(chosen)
            if ids:
                more = more_named  # only the named ones were asked for
            elif more and not dry_run:
                more = bool(matching(1))  # after the redrive: exact
        missing = [i for i in dict.fromkeys(ids) if i not in found] if ids else []
    if missing:
        app.out.warn(f"{len(missing)} id(s) are not dead messages of {queue_name} "
                     f"(or not matched by the filters): {', '.join(missing)}")
    if more:
        which = f"dead letters of {queue_name}" + (" that match" if filtered else "")
        app.out.note(f"would redrive the {count:,} oldest; more {which} would stay dead"
                     if dry_run else f"redrove the {count:,} oldest; more {which} are still "
                     "dead: run the command again for them")
    if app.out.json:
        result: dict[str, Any] = {"queue": queue_name, "dry_run": dry_run,
                                  "redriven": 0 if dry_run else count, "missing": missing,
                                  "more_left": more}
        if dry_run:
            result["would_redrive"] = [record(d) for d in letters]
        app.out.emit_json(result)
    elif dry_run:
        app.out.table([key("ID"), key("KEY", drop=1), Col("ATTEMPTS", short="ATT"),
                       text("LAST ERROR"), text("BODY", drop=2)],
                      [[d.id, d.ordering_key, d.attempt, _error(d.last_error),
                        preview(d.body, 40)] for d in letters],
                      title=f"would redrive {count} message(s) of {queue_name}",
                      empty="nothing to redrive")
    else:
        app.out.line(f"redrove {count} message(s) of {queue_name} to ready")


@click.command("purge")
@click.argument("queue_name", metavar="QUEUE", callback=check_queue_name)
@click.option("--dead", "dead_only", is_flag=True,
              help="Delete the dead messages instead of the live ones.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@common_options
def purge(queue_name: str, dead_only: bool, yes: bool) -> None:
    """Delete every live message of QUEUE (ready, scheduled, blocked, in flight), or
    with --dead every dead one. A consumer that later acks a deleted in-flight
    message gets LeaseLost.

    Asks first unless --yes; without a terminal to ask on, --yes is required.
    """
    app = current_app()
    with app.broker() as broker:
        queue = app.queue(broker, queue_name)
        figures = queue.stats()
        what = "dead" if dead_only else "live"
        count = figures.dead if dead_only else figures.backlog + figures.in_flight
        if count and not yes:
            _confirm(f"delete {count} {what} message(s) of {queue_name} at {broker.url}?")
        deleted = queue.purge(dead=dead_only) if count else 0
    if app.out.json:
        app.out.emit_json({"queue": queue_name, "dead": dead_only, "deleted": deleted})
    else:
        app.out.line(f"deleted {deleted} {what} message(s) of {queue_name}")


def _confirm(question: str) -> None:
    if not sys.stdin.isatty():
        raise click.UsageError(
            "refusing to purge without confirmation: no terminal to ask on; pass --yes")
    if not click.confirm(question, default=False, err=True):
        raise click.ClickException("purge cancelled; nothing was deleted")


COMMANDS = [dead, redrive, purge]
