"""What ``send`` and ``publish`` share: the message options and how BODY is read."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import click

from hailq import Envelope
from hailq.cli.context import Finite

F = TypeVar("F", bound=Callable[..., Any])

BODY_HELP = """BODY is JSON: '{"claim": 8311}', '42', '"text"' (note the inner quotes).
With --text BODY is sent as a JSON string as it is; with --raw as bytes (UTF-8).
BODY '-' reads standard input."""

ENVELOPE_FIELDS = {"body", "priority", "ordering_key", "delay", "headers", "dedup_id"}


def pairs(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
          ) -> list[tuple[str, str]]:
    """Click callback: ``NAME=VALUE`` options into pairs (VALUE may contain '=')."""
    found = []
    for item in values:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise click.BadParameter(f"expected NAME=VALUE, got {item!r}", ctx=ctx, param=param)
        found.append((name, value))
    return found


def message_options(f: F) -> F:
    """The per-message options of ``send`` and ``publish``."""
    for option in reversed([
        click.option("--priority", "-p", type=click.IntRange(0, 9), default=0,
                     show_default=True, help="0 (lowest) to 9 (highest)."),
        click.option("--ordering-key", "-k", metavar="KEY",
                     help="Messages with the same key are delivered one at a time, in order."),
        click.option("--delay", type=Finite(min=0), default=0.0, metavar="SECONDS",
                     help="Not receivable before SECONDS from now."),
        click.option("--dedup-id", metavar="ID",
                     help="A repeat of ID within the queue's dedup window sends nothing."),
        click.option("--header", "-H", "headers", multiple=True, callback=pairs,
                     metavar="NAME=VALUE", help="A header; repeat for more."),
        click.option("--text", "as_text", is_flag=True,
                     help="Send BODY as a JSON string instead of parsing it."),
        click.option("--raw", is_flag=True, help="Send BODY as bytes instead of JSON."),
    ]):
        f = option(f)
    return f


def read_body(text: str, *, raw: bool, as_text: bool) -> Any:
    """The body BODY stands for (see BODY_HELP)."""
    if raw and as_text:
        raise click.UsageError("give --raw or --text, not both")
    if text == "-":
        text = sys.stdin.read()
    if raw:
        return text.encode("utf-8", errors="surrogateescape")
    if as_text:
        return text
    try:
        return json.loads(text)
    except ValueError:
        raise click.UsageError(
            f"BODY is not valid JSON: {_short(text)!r}; quote strings as '\"text\"', or use "
            "--text to send it as a string, --raw to send it as bytes") from None


def envelope(body: Any, priority: int, ordering_key: str | None, delay: float,
             headers: list[tuple[str, str]], dedup_id: str | None) -> Envelope:
    return Envelope(body, priority=priority, ordering_key=ordering_key, delay=delay,
                    headers=dict(headers) or None, dedup_id=dedup_id)


def read_lines(lines: Iterable[str], *, envelopes: bool, raw: bool, as_text: bool,
               defaults: Envelope) -> list[tuple[int, Envelope]]:
    """Every message of a JSONL file with its line number; blank lines are skipped.

    ``defaults`` gives the options of plain bodies and the options an envelope leaves out.
    """
    found: list[tuple[int, Envelope]] = []
    for number, line in enumerate(lines, start=1):
        text = line.rstrip("\r\n")
        if not text.strip():
            continue
        if raw or as_text:
            found.append((number, _with_body(defaults, text.encode("utf-8") if raw else text)))
            continue
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise click.UsageError(f"line {number}: not valid JSON ({exc})") from None
        found.append((number, _from_envelope(value, number, defaults) if envelopes
                       else _with_body(defaults, value)))
    return found


def _from_envelope(value: Any, number: int, defaults: Envelope) -> Envelope:
    if not isinstance(value, dict) or "body" not in value:
        raise click.UsageError(f"line {number}: with --envelopes each line must be an object "
                               f"with a \"body\" and optionally {_optional()}")
    unknown = sorted(set(value) - ENVELOPE_FIELDS)
    if unknown:
        raise click.UsageError(f"line {number}: unknown field(s) {', '.join(unknown)}; "
                               f"allowed: body, {_optional()}")
    return Envelope(
        value["body"],
        priority=value.get("priority", defaults.priority),
        ordering_key=value.get("ordering_key", defaults.ordering_key),
        delay=value.get("delay", defaults.delay),
        headers={**(defaults.headers or {}), **value["headers"]}
        if isinstance(value.get("headers"), dict) else value.get("headers", defaults.headers),
        dedup_id=value.get("dedup_id"))


def _with_body(defaults: Envelope, body: Any) -> Envelope:
    return Envelope(body, priority=defaults.priority, ordering_key=defaults.ordering_key,
                    delay=defaults.delay, headers=defaults.headers)


def _optional() -> str:
    return ", ".join(sorted(ENVELOPE_FIELDS - {"body"}))


def _short(text: str, length: int = 40) -> str:
    return text if len(text) <= length else text[:length] + "..."
