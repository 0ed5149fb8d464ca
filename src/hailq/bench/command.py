"""The ``hailq bench`` command."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import click

from hailq.bench.runner import (
    Figure,
    bench_cycle,
    bench_keys,
    bench_latency,
    bench_send,
    machine,
)
from hailq.bench.scratch import bench_url, prepare_schemas, schema_of
from hailq.bench.shared import AWAITED, SHARED, render_shared
from hailq.bench.workers import WorkerFigure, bench_workers, render_workers
from hailq.cli.context import given_url, json_requested

DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/test?schema=hailq_bench"


def _pg_reachable(url: str) -> str | None:
    import psycopg

    from hailq.url import parse_url

    try:
        with psycopg.connect(parse_url(url).target, connect_timeout=3):
            return None
    except psycopg.Error as exc:
        return str(exc).strip().splitlines()[0]


PARTS = ("send", "shared", "cycle", "async", "keys", "latency", "workers")
# measured only when asked for with --only
EXTRA_PARTS = ("rate", "overview", "figures", "history")


def run_backend(url: str, *, runs: int, quick: bool,
                parts: tuple[str, ...] = PARTS) -> list[Figure]:
    """The figures of one backend (of ``parts``), in the order they are printed."""
    def say(text: str) -> None:
        click.echo(f"  … {text}", err=True)

    n = 5_000 if quick else 20_000
    figures: list[Figure] = []
    if "send" in parts:
        say("send")
        figures.extend(bench_send(url, runs, n_one=500 if quick else 2_000, n_batch=n))
    if "shared" in parts:
        from hailq.bench.shared import COROUTINES, THREADS, bench_shared

        say(f"single sends from {THREADS} threads, {COROUTINES} coroutines, one thread, "
            "and a bare insert loop")
        figures.extend(bench_shared(url, runs, n=1_600 if quick else 4_800))
    if "cycle" in parts:
        for procs, batch in ((1, 1), (4, 1), (1, 10), (4, 10)):
            say(f"receive+ack with {procs} consumer(s), batch {batch}")
            figures.append(bench_cycle(url, runs, n if batch > 1 else n // 4, procs, batch))
    if "async" in parts:
        from hailq.bench.aio import bench_async

        for batch in (1, 10):
            say(f"receive+ack through hailq.aio and through the sync API, batch {batch}")
            figures.extend(bench_async(url, runs, n // 4 if batch == 1 else n, batch))
    if "keys" in parts:
        for batch in (1, 10):
            say(f"receive+ack over 10,000 ordering keys and without, batch {batch}")
            figures.append(bench_keys(url, runs, n, batch))
    if "latency" in parts:
        backlogs = [1_000, 10_000, 100_000] if quick else [1_000, 100_000, 1_000_000]
        figures.extend(bench_latency(url, backlogs, 100 if quick else 300, say))
    if "workers" in parts:
        figures.extend(bench_workers(workers_url(url), runs, quick, say))
    if "rate" in parts:
        from hailq.bench.rates import bench_rate

        say("a rate limit of 50/s over 4 worker processes for 20 s")
        figures.extend(bench_rate(url))
    if "overview" in parts:
        from hailq.bench.overview import bench_overview

        figures.extend(bench_overview(url, runs, say))
    if "figures" in parts:
        from hailq.bench.figures import bench_figures

        say("a drain with the broker's figures and without, batch 1 and 10")
        figures.extend(bench_figures(url, runs, n))
    if "history" in parts:
        from hailq.bench.history import bench_drain, bench_search

        say("a drain with retention on and off, batch 1 and 10")
        figures.extend(bench_drain(url, runs, n))
        say("lookups among 1,000,000 finished messages")
        figures.extend(bench_search(url))
    return figures


def workers_url(url: str) -> str:
    """Where the worker figures are measured: a database of their own, fresh like the
    others at the start of their phases (not the one the latency phase filled with a
    million messages)."""
    from hailq.url import parse_url

    parsed = parse_url(url)
    if parsed.scheme == "sqlite":
        return f"sqlite:///{parsed.target.removesuffix('.db')}-workers.db"
    sep = "&" if "?" in parsed.target else "?"
    return f"{parsed.target}{sep}schema={schema_of(url)}_workers"


def render(backend: str, figures: list[Figure]) -> str:
    workers = [f for f in figures if isinstance(f, WorkerFigure)]
    keyed = [f for f in figures if "order keys" in f.name]
    overview = [f for f in figures if f.name.startswith("overview ")]
    counted = [f for f in figures if f.name.startswith("drain with figures")]
    shared = [f for f in figures if f.name.startswith((SHARED, AWAITED))]
    kept = [f for f in figures if f.name.startswith(("drain with retention", "history "))]
    awaited = [f for f in figures if f.name.startswith("async ")]
    hops = [f for f in awaited if f.unit == "µs"]
    awaited = [f for f in awaited if f not in hops]
    figures = [f for f in figures if not isinstance(f, WorkerFigure) and f not in keyed
               and f not in overview and f not in counted and f not in shared
               and f not in kept and f not in awaited and f not in hops]
    lines: list[str] = []
    if figures:
        lines += [f"\n{backend}", f"{'figure':<48}{'hailq':>12}{'raw driver':>12}{'ratio':>8}"]
    for f in figures:
        fmt = "{:>12,.0f}" if f.unit == "msgs/s" else "{:>9.3f} ms"
        lines.append(f"{f.name:<48}" + fmt.format(f.hailq) + fmt.format(f.raw)
                     + f"{f.ratio:>8.2f}")
    lat = [f for f in figures if f.name.startswith("receive latency")]
    if len(lat) >= 2:
        lines.append(f"{'latency, largest vs smallest backlog':<48}"
                     f"{lat[-1].hailq / lat[0].hailq:>11.2f}x"
                     f"{lat[-1].raw / lat[0].raw:>11.2f}x")
    if keyed:  # the baseline is hailq itself, without keys
        lines += [f"\n{backend}: per-key order",
                  f"{'figure':<48}{'keys':>12}{'no keys':>12}{'ratio':>8}"]
        lines += [f"{f.name.replace(' (vs none)', ''):<48}{f.hailq:>12,.0f}{f.raw:>12,.0f}"
                  f"{f.ratio:>8.2f}" for f in keyed]
    if overview:  # the baseline is every queue's figures read one queue at a time
        lines += [f"\n{backend}: the dashboard's overview",
                  f"{'figure (median)':<48}{'overview':>12}{'one by one':>12}{'ratio':>8}"]
        lines += [f"{f.name:<48}{f.hailq:>9.1f} ms{f.raw:>9.1f} ms{f.ratio:>8.2f}"
                  for f in overview]
    if counted:  # the baseline is hailq itself, figures off
        lines += [f"\n{backend}: what the figures cost",
                  f"{'figure (msgs/s, median)':<48}{'with':>12}{'without':>12}{'ratio':>8}"]
        lines += [f"{f.name.replace(' (vs without)', ''):<48}{f.hailq:>12,.0f}"
                  f"{f.raw:>12,.0f}{f.ratio:>8.2f}" for f in counted]
    if shared:  # the baselines: the same sends from one thread, a bare insert loop
        lines += render_shared(backend, shared)
    if kept:
        from hailq.bench.history import render_history

        lines += render_history(backend, kept)
    if awaited:  # the baseline is the sync API, in the same run
        lines += [f"\n{backend}: hailq.aio",
                  f"{'figure (msgs/s, median)':<48}{'async':>12}{'sync':>12}{'ratio':>8}"]
        lines += [f"{f.name.split(' (vs ')[0]:<48}{f.hailq:>12,.0f}"
                  f"{f.raw:>12,.0f}{f.ratio:>8.2f}" for f in awaited]
        if any("ack_and_receive" in f.name for f in awaited):
            lines.append("  sync: receive, then ack_many, for every async figure")
    if hops:  # SQLite: what each async call adds, and why it is what it is here
        from hailq.bench.aio import idle_policy

        lines += [f"{f.name + ' (median)':<48}{f.hailq:>9.1f} µs" for f in hops]
        policy = idle_policy()
        if policy:
            lines.append(f"  {policy}")
    return "\n".join(lines) + (render_workers(backend, workers) if workers else "")


def _record(report: dict[str, Any], backend: str, figures: list[Figure]) -> None:
    report["backends"][backend] = [f.as_json() for f in figures]


@click.command("bench")
@click.option("--sqlite/--no-sqlite", "use_sqlite", default=True,
              help="Measure embedded SQLite (a fresh file in a temporary directory).")
@click.option("--postgres", "pg_url", default=DEFAULT_PG, show_default=True,
              help="PostgreSQL URL to measure; 'none' skips it. Its ?schema= (default "
                   "hailq_bench) must be new or one hailq bench created: it is dropped "
                   "and created anew, as are that name + _raw and + _workers.")
@click.option("--runs", default=3, show_default=True, help="Runs per figure; medians are shown.")
@click.option("--quick", is_flag=True, help="Smaller counts and backlogs (a minute or two).")
@click.option("--only", "only", multiple=True, type=click.Choice(PARTS + EXTRA_PARTS),
              help="Measure only this part (repeatable): send, shared (single sends from "
                   "16 threads and from 100 coroutines, sharing commits), cycle "
                   "(receive+ack), async "
                   "(receive+ack through hailq.aio beside the sync API), keys "
                   "(receive+ack over 10,000 ordering keys), latency, workers, rate (a "
                   "rate limit of 50/s held by 4 worker processes; only when asked for), "
                   "overview (the dashboard's overview over 100 queues x 10,000 messages; "
                   "only when asked for), figures (a drain with the broker's figures and "
                   "without; only when asked for), history (a drain with retention and "
                   "without, and lookups among 1,000,000 finished messages; only when "
                   "asked for). Default: all but rate, overview, figures and history.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False),
              help="Also write the figures as JSON to this file.")
def bench_command(use_sqlite: bool, pg_url: str, runs: int, quick: bool,
                  only: tuple[str, ...], json_path: str | None) -> None:
    """Measure send, receive+ack and receive latency beside the raw driver.

    Ratios: for rates, hailq / raw (1.0 = as fast as the bare driver); for
    latencies, hailq / raw (1.0 = no overhead). Each figure is the median of
    --runs runs on this machine, measured in the same run as its baseline.

    The benchmark empties what it measures, so it never uses the broker of
    --url or HAILQ_URL: SQLite runs in a temporary file, PostgreSQL in the
    schema of --postgres (default hailq_bench, never hailq) and that name +
    "_raw" and + "_workers". It creates those schemas itself and marks them
    with the comment 'hailq bench scratch schema'; a later run drops and
    recreates only schemas that carry that mark. One that exists without it
    is refused (exit 2) before anything is measured, dropped or written.

    The worker drain of 1 process x 8 threads is measured twice, on a queue
    filled by send_many and on one filled by single sends, with the ratio.
    """
    if given_url(from_env=False) is not None:
        raise click.UsageError("bench does not take --url: it empties what it measures; "
                               "give --postgres URL with a schema of its own")
    if json_requested():
        raise click.UsageError("bench writes JSON with --json FILE after the command name")
    pg = None if pg_url.lower() == "none" else bench_url(pg_url)
    pg_problem = _pg_reachable(pg) if pg else None
    if pg and not pg_problem:
        # First of all, so that a schema that is not the benchmark's is refused before
        # anything else is done.
        prepare_schemas(pg)
    report: dict[str, Any] = {"machine": machine(), "runs": runs, "quick": quick,
                              "backends": {}}
    if use_sqlite:
        with tempfile.TemporaryDirectory(prefix="hailq-bench-") as tmp:
            click.echo("SQLite …", err=True)
            figures = run_backend(f"sqlite:///{Path(tmp) / 'bench.db'}", runs=runs,
                                  quick=quick, parts=only or PARTS)
            click.echo(render("SQLite (synchronous=full sends, WAL)", figures))
            _record(report, "sqlite", figures)
    if pg and pg_problem:
        click.echo(f"PostgreSQL skipped: {pg_problem}", err=True)
    elif pg:
        click.echo(f"PostgreSQL (schema {schema_of(pg)}) …", err=True)
        figures = run_backend(pg, runs=runs, quick=quick, parts=only or PARTS)
        click.echo(render("PostgreSQL (synchronous commit for sends)", figures))
        _record(report, "postgresql", figures)
    if json_path:
        Path(json_path).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    bench_command()
