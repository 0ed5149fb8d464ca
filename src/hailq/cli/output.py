"""Rendering for the CLI: rich tables for people, JSON for scripts.

Everything a command prints goes through ``Output``, so the two modes stay
in step. Tables fit the terminal without splitting a cell: names, ids and
figures are never broken across lines (see ``FitTable``). Text from the queue
(bodies, headers, error messages) is never interpreted as rich markup and has
its control characters escaped, so a hostile message cannot restyle or
scramble an operator's terminal.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

import click
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text

from hailq._time import format_age

# Off a terminal rich would wrap at 80 columns; pipes and logs get long lines instead.
PIPE_WIDTH = 200
PREVIEW_LENGTH = 60

Cell = str | int | float | None
TEXT_MIN = 12  # a free-text column narrower than this says too little to keep


@dataclass(frozen=True)
class Col:
    """A table column and what may happen to it when the terminal is narrow.

    ``kind``: ``key`` (a name or id people copy) and ``value`` (a figure) are
    shown whole or not at all; ``text`` (an error, a body, a reason) is cut
    with an ellipsis; ``prose`` (a message's errors in ``hailq show``) wraps
    between words. ``short`` is a narrower header used when space is
    tight. ``drop`` > 0 lets the column be left out, highest first, when the
    table cannot fit otherwise; ``--json`` always has every field.
    """

    header: str
    kind: Literal["key", "value", "text", "prose"] = "value"
    short: str | None = None
    drop: int = 0


def key(header: str, **more: Any) -> Col:
    """A column of names or ids: never split, never cut (short of a name wider than
    the whole terminal)."""
    return Col(header, "key", **more)


def text(header: str, **more: Any) -> Col:
    """A column of free text, cut with an ellipsis to fit."""
    return Col(header, "text", **more)


def prose(header: str, **more: Any) -> Col:
    """A column of text worth reading whole: wrapped between words to fit."""
    return Col(header, "prose", **more)


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

    def table(self, columns: Sequence[str | Col], rows: Iterable[Sequence[Cell]],
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


def make_table(columns: Sequence[str | Col], rows: Iterable[Sequence[Cell]],
               title: str | None = None, empty: str = "nothing to show") -> FitTable | Text:
    """A table of plain-text cells laid out to fit the width it is printed at; ``empty``
    when there are no rows. A plain string column is a ``value`` column."""
    cols = [c if isinstance(c, Col) else Col(c) for c in columns]
    materialised = [list(r) for r in rows]
    if not materialised:
        return Text(f"{title}: {empty}" if title else empty)
    numeric = {i for i in range(len(cols))
               if all(isinstance(r[i], int | float) for r in materialised if r[i] is not None)}
    return FitTable(cols, [[cell_text(c) for c in r] for r in materialised], numeric, title)


class FitTable:
    """A table that fits the width it is rendered at without splitting a cell.

    In turn: every column as it is; narrower headers; columns left out (``Col.drop``,
    highest first, named below the table); and when even that is too wide, one block
    of ``HEADER value`` lines per row. Free-text columns take what width is left,
    cut with an ellipsis. Laid out at render time, so a live view re-fits on resize.
    """

    def __init__(self, cols: list[Col], rows: list[list[str]], numeric: set[int],
                 title: str | None) -> None:
        self.cols, self.rows, self.numeric, self.title = cols, rows, numeric, title
        # Each column's widest cell, measured once (a list may hold 100,000 rows).
        self._widest = [max((_cell_width(r[i]) for r in rows), default=0)
                        for i in range(len(cols))]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        if self.title:
            yield Text(self.title, style="table.title", no_wrap=True, overflow="ellipsis")
        plan = self._plan(width)
        if plan is None:
            yield from self._blocks(width)
            return
        shown, short, widths = plan
        table = Table(header_style="bold")
        for i, w in zip(shown, widths, strict=True):
            col = self.cols[i]
            table.add_column(col.short or col.header if short else col.header, width=w,
                             justify="right" if i in self.numeric else "left",
                             **_fitting(col.kind))
        for row in self.rows:
            table.add_row(*(Text(row[i]) for i in shown))
        yield table
        left_out = [c.header for i, c in enumerate(self.cols) if i not in shown]
        if left_out:
            yield Text(f"left out to fit {width} columns: {', '.join(left_out)} "
                       "(a wider terminal or --json shows them)", style="dim")

    def _natural(self, i: int, short: bool) -> int:
        col = self.cols[i]
        header = col.short or col.header if short else col.header
        return max(cell_len(header), self._widest[i])

    def _plan(self, width: int) -> tuple[list[int], bool, list[int]] | None:
        """Which columns, whether with short headers, and each one's width; None when
        no table fits."""
        everything = list(range(len(self.cols)))
        for short in (False, True):
            if self._least(everything, short) <= width:
                return everything, short, self._widths(everything, short, width)
        shown = list(everything)
        dropped = []
        for i in sorted((i for i in everything if self.cols[i].drop > 0),
                        key=lambda i: (-self.cols[i].drop, -i)):
            shown.remove(i)
            dropped.append(i)
            if self._least(shown, True) <= width:
                break
        else:
            return None
        # Take back what fits beside the rest, most wanted first; not free text, which
        # would only narrow the free text kept.
        for i in reversed(dropped[:-1]):
            if (self.cols[i].kind in ("key", "value")
                    and self._least(sorted([*shown, i]), True) <= width):
                shown = sorted([*shown, i])
        return shown, True, self._widths(shown, True, width)

    def _least(self, cols: list[int], short: bool) -> int:
        """The narrowest table of ``cols``: free text at its least, borders and padding."""
        return sum(self._narrowest(i, short) for i in cols) + 3 * len(cols) + 1

    def _narrowest(self, i: int, short: bool) -> int:
        natural = self._natural(i, short)
        return min(natural, TEXT_MIN) if self.cols[i].kind in ("text", "prose") else natural

    def _widths(self, cols: list[int], short: bool, width: int) -> list[int]:
        """Each column's width: whole for names and figures; free text takes what is
        left, left to right."""
        spare = width - self._least(cols, short)
        widths = []
        for i in cols:
            least = self._narrowest(i, short)
            more = min(spare, self._natural(i, short) - least)
            widths.append(least + more)
            spare -= more
        return widths

    def _blocks(self, width: int) -> RenderResult:
        """One ``HEADER  value`` block per row: for a table too wide for any layout.

        Plain lines, not a grid, so nothing pads them: an id copied from one is clean.
        """
        label = max(cell_len(c.header) for c in self.cols)
        for n, row in enumerate(self.rows):
            if n:
                yield Text("")
            for col, cell in zip(self.cols, row, strict=True):
                line = Text.assemble((col.header.ljust(label), "bold"), "  ", cell)
                if col.kind == "prose":
                    yield line
                else:  # the last resort: a name wider than the terminal is cut too
                    yield _cut(line, width)


def _cut(line: Text, width: int) -> Text:
    """``line`` on one line of at most ``width`` cells, cut with an ellipsis."""
    line.no_wrap, line.overflow = True, "ellipsis"
    line.truncate(width, overflow="ellipsis")
    return line


def _fitting(kind: str) -> dict[str, Any]:
    """How a column's cells fit their width: prose wraps, text is cut with an ellipsis,
    names, ids and figures are given their whole width (so never cut)."""
    if kind == "prose":
        return {"no_wrap": False, "overflow": "fold"}
    return {"no_wrap": True, "overflow": "ellipsis" if kind == "text" else "crop"}


def _cell_width(cell: str) -> int:
    return max(cell_len(line) for line in cell.splitlines() or [""])


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
    return format_age(seconds)


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
    if not console.is_terminal and not os.environ.get("COLUMNS", "").isdigit():
        console = Console(file=stream, highlight=False, width=PIPE_WIDTH)
    return console
