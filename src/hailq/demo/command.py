"""``hailq demo``: the hailstorm, live, then the report (``--json`` for data only).

Loaded by the ``hailq`` group (``hailq.cli.main``) when asked for, so ``--url``
and ``--json`` may come before the command name as for every hailq command;
``python -m hailq.demo.command`` runs the command on its own.

Unlike the other commands the demo does not read ``HAILQ_URL``: the variable
names the user's own broker (the README's quick start exports one), and the
demo, which counts everything it finds, must never run in it. Only an explicit
``--url`` chooses the demo's broker.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import click
from rich.console import Console
from rich.live import Live

from hailq.cli.context import (
    ENV_URL,
    Finite,
    env_url_set,
    given_url,
    json_requested,
    options_with,
)
from hailq.cli.output import note
from hailq.demo.report import Report
from hailq.demo.run import Progress, Run
from hailq.demo.story import ODD_CHECKERS, Plan
from hailq.demo.view import render
from hailq.demo.workspace import Workspace
from hailq.errors import HailqError


@click.command("demo", context_settings={"help_option_names": ["-h", "--help"]})
@options_with(f"Broker URL, also accepted before 'demo'; default: a fresh SQLite file in a "
              f"temporary directory ({ENV_URL} is not used: it names your own broker). A "
              "SQLite file must not exist yet; on PostgreSQL the demo works in a schema of "
              "its own.",
              "Print the report as JSON; no live view. Also accepted before 'demo'.")
@click.option("--claims", type=click.IntRange(100, 1_000_000), default=20_000,
              show_default=True, help="Claims the portal sends in the burst.")
@click.option("--checkers", type=click.IntRange(ODD_CHECKERS + 1, 500), default=50,
              show_default=True,
              help="Image checkers, the crashing and the slow one included.")
@click.option("--scale", type=Finite(1, 100_000), default=100.0,
              show_default=True,
              help="Time runs this many times faster than in the story (3 s check, "
                   "5 min lease).")
@click.option("--seed", type=int, default=8311, show_default=True,
              help="Seed of the made-up claims.")
@click.option("--keep", metavar="DIR", default=None,
              help="Keep the SQLite files (and the PostgreSQL schema) in DIR, which must not "
                   "hold an earlier run.")
@click.option("--slo", is_flag=True,
              help="Instead: service levels that schedule. One load through strict "
                   "priority, the best aging and deadline order, simulated and live in "
                   "scaled time (--scale 10 and --seed 1 unless given; 6 to 10 minutes).")
@click.option("--steps", type=click.IntRange(1, 20), default=6, show_default=True,
              help="With --slo: pools named in turn at most, each after a live run at "
                   "the one before breached.")
def demo_command(claims: int, checkers: int, scale: float, seed: int,
                 keep: str | None, slo: bool, steps: int) -> None:
    """Run the hailstorm of 20,000 insurance claims and report what hailq kept.

    A customer portal sends the claims in a burst (500 VIP, some contracts
    whose claims must be checked in order) to a topic; 50 image checkers and a
    statistics program each get a copy. One of the checkers is killed
    mid-claim, one claim has a corrupt photo, one checker is slower than its
    lease. The report lists the promises (nothing lost, nothing done twice,
    one dead letter, ...) and the figures (makespan against its target,
    throughput, waits). Exit code 0 when every promise holds, 1 when one is
    broken; a figure never fails the demo (a missed makespan target is named,
    not failed: it depends on the machine). 2 when it cannot start with the
    --url or --keep given.
    """
    ctx = click.get_current_context()
    url = given_url(from_env=False)
    if url is None and env_url_set():
        note(f"the demo does not use {ENV_URL} (your own broker); it runs in a workspace of "
             "its own. Give --url to choose its broker.")
    as_json = json_requested()
    if slo:
        _slo(ctx, url, keep, scale, seed, as_json, steps)
        return
    plan = Plan(claims=claims, checkers=checkers, scale=scale, seed=seed)
    with _workspace(url, keep) as workspace:
        report = _run(plan, workspace, as_json)
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
    else:
        console = Console()
        report.render(console)
        if keep:
            where = f"; PostgreSQL schema {workspace.schema}" if workspace.schema else ""
            console.print(f"kept: {workspace.directory}{where}")
    ctx.exit(0 if report.ok else 1)


def _slo(ctx: click.Context, url: str | None, keep: str | None, scale: float, seed: int,
         as_json: bool, steps: int) -> None:
    from click.core import ParameterSource

    from hailq.demo.slo import DEFAULT_SCALE, run_slo, table

    if ctx.get_parameter_source("scale") is ParameterSource.DEFAULT:
        scale = DEFAULT_SCALE
    if ctx.get_parameter_source("seed") is ParameterSource.DEFAULT:
        seed = 1
    console = Console(stderr=as_json)
    with _workspace(url, keep) as workspace:
        report = run_slo(workspace.url, workspace.display_url.split(":", 1)[0], scale, seed,
                         None if as_json else console.print, steps)
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
    else:
        console.print(f"\nbreaches / p99 wait per priority, story seconds (time ran "
                      f"{report.scale:g} times faster; {report.seconds:.0f} s in all):")
        for line in table(report):
            click.echo(line)
        for claim, held in report.shows().items():
            console.print(f"{'yes' if held else 'NO '}  {claim.replace('_', ' ')}")
    ctx.exit(0 if report.complete else 1)


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


@contextmanager
def _workspace(url: str | None, keep: str | None) -> Iterator[Workspace]:
    """The demo's workspace, closed after the run; a URL or --keep it cannot use exits 2,
    as any bad input does, a failure of the run itself exits 1."""
    try:
        workspace = Workspace.create(url, keep)
    except HailqError as exc:
        raise click.UsageError(str(exc)) from None
    try:
        yield workspace
    except HailqError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        workspace.close()
