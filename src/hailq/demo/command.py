"""``hailq demo``: the hailstorm, live, then the report (``--json`` for data only).

Registered in the ``hailq`` group as ``demo``; until then ``python -m
hailq.demo.command`` runs the same command.
"""

from __future__ import annotations

import json
import sys

import click
from rich.console import Console
from rich.live import Live

from hailq.demo.report import Report
from hailq.demo.run import Progress, Run
from hailq.demo.story import Plan
from hailq.demo.view import render
from hailq.demo.workspace import Workspace
from hailq.errors import HailqError

URL_META_KEY = "hailq.url"  # where the hailq group keeps a --url given before "demo"


@click.command("demo", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--url", metavar="URL", default=None,
              help="Broker URL; default: a fresh SQLite file in a temporary directory. "
                   "On PostgreSQL the demo works in a schema of its own.")
@click.option("--claims", type=click.IntRange(100, 1_000_000), default=20_000,
              show_default=True, help="Claims the portal sends in the burst.")
@click.option("--checkers", type=click.IntRange(2, 500), default=50, show_default=True,
              help="Image checkers (worker slots).")
@click.option("--scale", type=click.FloatRange(1, 100_000), default=100.0,
              show_default=True,
              help="Time runs this many times faster than in the story (3 s check, "
                   "5 min lease).")
@click.option("--seed", type=int, default=8311, show_default=True,
              help="Seed of the made-up claims.")
@click.option("--keep", metavar="DIR", default=None,
              help="Keep the SQLite files (and the PostgreSQL schema) in DIR.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON; no live view.")
def demo_command(url: str | None, claims: int, checkers: int, scale: float, seed: int,
                 keep: str | None, as_json: bool) -> None:
    """Run the hailstorm of 20,000 insurance claims and report what hailq kept.

    A customer portal sends the claims in a burst (500 VIP, some contracts
    whose claims must be checked in order) to a topic; 50 image checkers and a
    statistics program each get a copy. One checker is killed mid-claim, one
    claim has a corrupt photo, one checker is slower than its lease. Exit code
    0 when every invariant holds (nothing lost, nothing done twice, one dead
    letter, ...), 1 otherwise.
    """
    ctx = click.get_current_context()
    url = url or ctx.meta.get(URL_META_KEY)
    plan = Plan(claims=claims, checkers=checkers, scale=scale, seed=seed)
    try:
        workspace = Workspace.create(url, keep)
    except HailqError as exc:
        raise click.ClickException(str(exc)) from None
    try:
        report = _run(plan, workspace, as_json)
    except HailqError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        workspace.close()
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
    else:
        console = Console()
        report.render(console)
        if keep:
            where = f"; PostgreSQL schema {workspace.schema}" if workspace.schema else ""
            console.print(f"kept: {workspace.directory}{where}")
    ctx.exit(0 if report.ok else 1)


def _run(plan: Plan, workspace: Workspace, as_json: bool) -> Report:
    run = Run(plan, workspace)
    if as_json or not sys.stdout.isatty():
        return run.execute()
    console = Console()
    console.print(f"broker: {workspace.display_url}   results: {workspace.results_path}")
    with Live(console=console, refresh_per_second=8, transient=False) as live:

        def show(progress: Progress) -> None:
            live.update(render(progress))

        return run.execute(show)


if __name__ == "__main__":
    demo_command()
