"""Rendering for the CLI: rich tables for people, JSON for scripts.

Everything a command prints goes through ``Output``, so the two modes stay
in step. Text from the queue (bodies, headers, error messages) is never
interpreted as rich markup and has its control characters escaped, so a
hostile message cannot restyle or scramble an operator's terminal.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import sys
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

# Off a terminal rich would wrap at 80 columns; pipes and logs get long lines instead.
PIPE_WIDTH = 200
PREVIEW_LENGTH = 60

Cell = str | int | float | None


class Output:
    """Where a command's results go: ``json`` mode prints JSON, else tables and lines."""

    def __init__(self, json_mode: bool) -> None:
        self.json = json_mode
        self.console = _console(sys.stdout)
        self.err_console = _console(sys.stderr)

    @property
    def interactive(self) -> bool:
        """True when a person is watching: human mode on a terminal."""
        return not self.json and self.console.is_terminal

    def emit_json(self, value: Any) -> None:
        """Print one JSON document (plain stdout, never wrapped or coloured)."""
        click.echo(json.dumps(value, indent=2, ensure_ascii=False, default=_json_default))

    def emit_json_line(self, value: Any) -> None:
        """Print one compact JSON document on a single line (for streams such as --watch)."""
        click.echo(json.dumps(value, ensure_ascii=False, separators=(",", ":"),
                              default=_json_default))

    def line(self, text: str) -> None:
        """Print a human sentence (not markup)."""
        self.console.print(Text(text), soft_wrap=True)

    def warn(self, text: str) -> None:
        """A warning on stderr, in both modes: it never pollutes JSON on stdout."""
        click.echo(f"hailq: warning: {text}", err=True)

    def note(self, text: str) -> None:
        """Information on stderr, in both modes (see ``note``)."""
        note(text)

    def note_cut_short(self, shown: int, total: int | None, what: str, *, limit: int,
                       most: int) -> None:
        """Say on stderr that a list stopped at ``--limit`` with more left out.

        ``total`` is how many there are, or None when only "more" is known (a
        filtered list is not counted); nothing is said when nothing was left out.
        """
        if total is not None and total <= shown:
            return
        of = f"{total:,}" if total is not None else f"more than {shown:,}"
        hint = (f"use --limit to see more (up to {most:,})" if limit < most
                else f"--limit {most:,} is the most")
        note(f"showing {shown:,} of {of} {what}; {hint}")

    def table(self, columns: Sequence[str], rows: Iterable[Sequence[Cell]],
              title: str | None = None, empty: str = "nothing to show") -> None:
        self.console.print(make_table(columns, rows, title, empty))

    @contextmanager
    def progress(self, total: int, what: str) -> Iterator[Any]:
        """A progress bar on stderr when a person watches, else a silent stand-in.

        Yields a function ``advance(n)``.
        """
        if self.json or not self.err_console.is_terminal:
            yield lambda n: None
            return
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
        )

        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TimeRemainingColumn(), console=self.err_console, transient=True) as bar:
            task = bar.add_task(what, total=total)
            yield lambda n: bar.advance(task, n)


def note(text: str) -> None:
    """Print ``hailq: note: text`` on stderr: worth knowing, not a problem, never on stdout."""
    click.echo(f"hailq: note: {text}", err=True)


def make_table(columns: Sequence[str], rows: Iterable[Sequence[Cell]],
               title: str | None = None, empty: str = "nothing to show") -> Table | Text:
    """A rich table whose cells are plain text; ``empty`` when there are no rows."""
    table = Table(title=title, title_justify="left", header_style="bold")
    numeric = set()
    materialised = [list(r) for r in rows]
    for index, name in enumerate(columns):
        if materialised and all(isinstance(r[index], int | float) for r in materialised
                                if r[index] is not None):
            numeric.add(index)
        table.add_column(name, justify="right" if index in numeric else "left",
                         overflow="fold")
    if not materialised:
        return Text(f"{title}: {empty}" if title else empty)
    for row in materialised:
        table.add_row(*(Text(cell_text(c)) for c in row))
    return table


def cell_text(value: Cell) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:g}"
    return clean(str(value))


def clean(text: str) -> str:
    """Escape control characters (newlines included) so text stays on its line."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def age(seconds: float | None) -> str:
    """A short human duration: 42s, 3m07s, 2h05m, 4d03h."""
    if seconds is None:
        return "-"
    s = max(int(seconds), 0)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def preview(body: Any, length: int = PREVIEW_LENGTH) -> str:
    """A one-line glimpse of a body: compact JSON, or ``bytes:`` and the escaped text."""
    if isinstance(body, bytes):
        text = "bytes:" + body.decode("utf-8", errors="backslashreplace")
    else:
        text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    text = clean(text)
    return text if len(text) <= length else text[:length - 1] + "…"


def body_fields(body: Any) -> dict[str, Any]:
    """A body for JSON output: ``body`` plus ``body_encoding`` (``json`` or ``base64``)."""
    if isinstance(body, bytes):
        return {"body": base64.b64encode(body).decode("ascii"), "body_encoding": "base64"}
    return {"body": body, "body_encoding": "json"}


def record(item: Any) -> dict[str, Any]:
    """A dataclass as a JSON-ready dict, with its body (if any) encoded by ``body_fields``."""
    data = {f.name: getattr(item, f.name) for f in dataclasses.fields(item)}
    result: dict[str, Any] = {}
    for key, value in data.items():
        if key == "body":
            result.update(body_fields(value))
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            result[key] = record(value)
        elif isinstance(value, list):
            result[key] = [record(v) if dataclasses.is_dataclass(v) else v for v in value]
        else:
            result[key] = value
    return result


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return record(value)
    raise TypeError(f"cannot show {type(value).__name__} as JSON")


def _console(stream: Any) -> Console:
    console = Console(file=stream, highlight=False)
    if not console.is_terminal:
        console = Console(file=stream, highlight=False, width=PIPE_WIDTH)
    return console
