"""``hailq doctor``: name the seed's four typical mistakes from the stored figures of a
recent window (rules 26 and 36)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

import click
from rich.console import Group
from rich.padding import Padding
from rich.panel import Panel
from rich.syntax import Syntax
from rich.text import Text

from hailq.cli.context import check_queue_name, common_options, current_app
from hailq.cli.output import clean
from hailq.doctor import examine
from hailq.policy.diagnosis import (
    DEFAULT_SINCE,
    MAX_SINCE,
    MIN_SINCE,
    Diagnosis,
    window_text,
)
from hailq.policy.findings import Finding

FOUND = 3  # exit code: something was found (1 stays "failed while doing it")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)([smhd])")


class DurationType(click.ParamType):  # type: ignore[type-arg]  # varies by click version
    """``90s``, ``15m``, ``1h30m``, ``1d`` or bare seconds (``900``), within bounds."""

    name = "duration"

    def __init__(self, minimum: float, maximum: float) -> None:
        self.minimum, self.maximum = minimum, maximum

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        if isinstance(value, float | int):
            seconds = float(value)
        else:
            text = str(value).strip().lower()
            if re.fullmatch(r"[0-9]+(?:\.[0-9]+)?", text):
                seconds = float(text)
            elif text and re.fullmatch(r"(?:[0-9]+(?:\.[0-9]+)?[smhd])+", text):
                seconds = sum(float(n) * _UNITS[u] for n, u in _PART.findall(text))
            else:
                self.fail(f"{value!r} is not a duration (such as 90s, 15m, 1h30m, 1d, "
                          "or seconds)", param, ctx)
        if not self.minimum <= seconds <= self.maximum:
            self.fail(f"{value!r} is outside {window_text(self.minimum)} to "
                      f"{window_text(self.maximum)}", param, ctx)
        return seconds


@click.command("doctor")
@click.option("--queue", "-q", "queues", multiple=True, metavar="Q", callback=check_queue_name,
              help="Examine this queue only; repeat for more. Default: every queue.")
@click.option("--since", type=DurationType(MIN_SINCE, MAX_SINCE), default="15m",
              metavar="DURATION", show_default=True,
              help="The window to examine, back from now: 90s, 15m, 2h, 1d (at most 24 h, "
                   "as long as the per-slot figures are kept).")
@common_options
def doctor(queues: tuple[str, ...], since: float) -> int:
    """Name the typical mistakes the stored figures show over a recent window (the last
    15 minutes unless --since says otherwise), each with its evidence and a concrete
    suggestion: poison messages (one finding per error), a lease too short for the
    handler time, duplicate-effect risk (redeliveries in the window, handlers without
    an inbox) and a saturated downstream (more workers, flat throughput, rising
    handler time).

    Reads only. Exit codes: 0 nothing found in the window, 3 something found (for
    scripts), 1 it failed while looking. What lies before the window (dead letters of
    a past incident) and a queue at its rate limit are notes, which never make the
    exit code 3. docs/operations/doctor.md explains each finding and its thresholds.
    """
    app = current_app()
    with app.broker() as broker:
        names = [app.queue(broker, name).name for name in queues] if queues else None
        results = examine(broker, names, since)
    found = sum(len(d.findings) for d in results)
    if app.out.json:
        app.out.emit_json(doctor_record(results, since))
    else:
        _show(app.out.console, results, since)
    return FOUND if found else 0


def doctor_record(results: list[Diagnosis], since: float = DEFAULT_SINCE) -> dict[str, Any]:
    """The one JSON shape of ``hailq doctor --json``."""
    return {"healthy": all(d.healthy for d in results), "since": since,
            "findings": [f.record() for d in results for f in d.findings],
            "notes": [n.record() for d in results for n in d.notes],
            "queues": [{"queue": d.queue, "healthy": d.healthy,
                        "findings": [f.kind for f in d.findings]} for d in results]}


def _show(console: Any, results: list[Diagnosis], since: float) -> None:
    if not results:
        console.print(Text("no queues yet: nothing to examine"))
        return
    for d in results:
        for f in d.findings:
            console.print(Panel(Group(*_body(f)), title=Text(f"{d.queue}: {f.kind}"),
                                title_align="left", border_style="red"))
        for n in d.notes:
            console.print(Text(f"{d.queue}: {n.kind}: {n.text}", style="yellow"))
        if d.healthy:
            console.print(Text(f"{d.queue}: no finding", style="green"))
    found = sum(len(d.findings) for d in results)
    sick = sum(1 for d in results if not d.healthy)
    window = f"in the last {window_text(since)}"
    console.print(Text(f"{found} finding(s) on {sick} of {len(results)} queue(s) {window}"
                       if found else
                       f"{len(results)} queue(s) examined, nothing found {window}",
                       style="bold"))


def _body(f: Finding) -> list[Any]:
    body: list[Any] = [Text(f.title, style="bold")]
    for name, value in f.evidence.items():
        if isinstance(value, list) and value and isinstance(value[0], dict):
            body.append(Text(f"  {name}:", style="dim"))
            body += [Text("    - " + clean(", ".join(f"{k}: {_value(v)}"
                                                   for k, v in item.items())),
                          style="dim") for item in value]
        else:
            shown = _time(value) if name.endswith("_at") else _value(value)
            body.append(Text(f"  {name}: {clean(shown)}", style="dim"))
    body.append(Text(clean(f.suggestion)))
    for s in f.snippets:
        if s.kind == "shell":  # a command line to paste into a shell
            body.append(Text(f"  $ {clean(s.code)}", style="cyan"))
        else:  # lines of Python for the handler: labelled, indented, never a '$' line
            body.append(Text("  Python:", style="dim"))
            body.append(Padding(Syntax(s.code, "python", theme="ansi_dark",
                                       background_color="default", word_wrap=True),
                                (0, 0, 0, 4)))
    return body


def _time(value: Any) -> str:
    if not isinstance(value, int | float):
        return _value(value)
    return datetime.fromtimestamp(value, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list | dict):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


COMMANDS = [doctor]
