"""``hailq doctor``: name the seed's four typical mistakes from the stored figures (rule 26)."""

from __future__ import annotations

import json
from typing import Any

import click
from rich.console import Group
from rich.panel import Panel
from rich.text import Text

from hailq.cli.context import check_queue_name, common_options, current_app
from hailq.cli.output import clean
from hailq.policy.diagnosis import Diagnosis, diagnose, evidence_of

FOUND = 3  # exit code: something was found (1 stays "failed while doing it")
DEAD_LETTERS_READ = 1000  # the dead letters read per queue for poison messages


@click.command("doctor")
@click.option("--queue", "-q", "queues", multiple=True, metavar="Q", callback=check_queue_name,
              help="Examine this queue only; repeat for more. Default: every queue.")
@common_options
def doctor(queues: tuple[str, ...]) -> int:
    """Name the typical mistakes the stored figures show, each with its evidence and a
    concrete suggestion: poison messages, a lease too short for the handler time,
    duplicate-effect risk (redelivered messages, handlers without an inbox) and a
    saturated downstream (more workers, flat throughput, rising handler time).

    Reads only. Exit codes: 0 nothing found, 3 something found (for scripts), 1 it
    failed while looking. A queue at its rate limit is noted, not called saturated.
    docs/operations/doctor.md explains each finding and its thresholds.
    """
    app = current_app()
    with app.broker() as broker:
        chosen = [app.queue(broker, name) for name in queues] if queues else broker.queues()
        workers = broker.workers()
        results = [diagnose(evidence_of(q.figures(), q.dead_letters(limit=DEAD_LETTERS_READ),
                                        workers)) for q in chosen]
    found = sum(len(d.findings) for d in results)
    if app.out.json:
        app.out.emit_json(doctor_record(results))
    else:
        _show(app.out.console, results)
    return FOUND if found else 0


def doctor_record(results: list[Diagnosis]) -> dict[str, Any]:
    """The one JSON shape of ``hailq doctor --json``."""
    return {"healthy": all(d.healthy for d in results),
            "findings": [f.record() for d in results for f in d.findings],
            "notes": [n.record() for d in results for n in d.notes],
            "queues": [{"queue": d.queue, "healthy": d.healthy,
                        "findings": [f.kind for f in d.findings]} for d in results]}


def _show(console: Any, results: list[Diagnosis]) -> None:
    if not results:
        console.print(Text("no queues yet: nothing to examine"))
        return
    for d in results:
        for f in d.findings:
            body: list[Any] = [Text(f.title, style="bold")]
            for name, value in f.evidence.items():
                if isinstance(value, list) and value and isinstance(value[0], dict):
                    body.append(Text(f"  {name}:", style="dim"))
                    body += [Text("    - " + clean(", ".join(f"{k}: {_value(v)}"
                                                           for k, v in item.items())),
                                  style="dim") for item in value]
                else:
                    body.append(Text(f"  {name}: {clean(_value(value))}", style="dim"))
            body.append(Text(clean(f.suggestion)))
            body += [Text(f"  $ {clean(c)}", style="cyan") for c in f.commands]
            console.print(Panel(Group(*body), title=Text(f"{d.queue}: {f.kind}"),
                                title_align="left", border_style="red"))
        for n in d.notes:
            console.print(Text(f"{d.queue}: {n.kind}: {n.text}", style="yellow"))
        if d.healthy:
            console.print(Text(f"{d.queue}: no finding", style="green"))
    found = sum(len(d.findings) for d in results)
    sick = sum(1 for d in results if not d.healthy)
    console.print(Text(f"{found} finding(s) on {sick} of {len(results)} queue(s)"
                       if found else f"{len(results)} queue(s) examined, nothing found",
                       style="bold"))


def _value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list | dict):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


COMMANDS = [doctor]
