"""The live terminal view: progress, queue depth, throughput, busy checkers, recent events."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from hailq.demo.run import Progress


def render(p: Progress) -> RenderableType:
    """One frame of the view."""
    plan = p.plan
    q = p.queue
    dead = q.dead if q else 0
    done = p.results + dead
    figures = Table.grid(padding=(0, 2))
    figures.add_column(style="bold")
    figures.add_column(justify="right")
    figures.add_column(style="bold")
    figures.add_column(justify="right")
    figures.add_row("claims sent", f"{p.sent:,}/{plan.claims:,}",
                    "checkers busy", f"{p.busy}/{plan.checkers}")
    figures.add_row("queue: ready", f"{q.ready + q.scheduled + q.blocked:,}" if q else "…",
                    "queue: in flight", f"{q.in_flight:,}" if q else "…")
    figures.add_row("results", f"{p.results:,}", "throughput", f"{p.throughput:,.0f}/s")
    figures.add_row("dead letters", f"{dead}", "redelivered", f"{q.redelivered}" if q else "…")
    figures.add_row("statistics counted", f"{p.statistics:,}", "elapsed", f"{p.elapsed:.1f} s")
    bar = Table.grid(padding=(0, 1))
    bar.add_column(width=50)
    bar.add_column()
    bar.add_row(ProgressBar(total=plan.claims, completed=done, width=50),
                f"{100 * done / plan.claims:5.1f}%")
    events = Text("\n".join(p.events) if p.events else "…", style="dim")
    title = (f"hailstorm: {plan.claims:,} claims, {plan.checkers} image checkers, "
             f"check {1000 * plan.check_seconds:g} ms, lease {plan.lease:g} s")
    return Panel(Group(bar, Text(), figures, Text(), events), title=title,
                 title_align="left")
