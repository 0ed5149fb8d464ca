"""``hailq top``: every queue on one 80-column screen, refreshed (rule 25's figures as
the overview reads them: one snapshot of all queues, counts capped)."""

from __future__ import annotations

import time

import click
from rich.console import Console
from rich.live import Live
from rich.table import Table

import hailq
from hailq.cli.context import Finite, common_options, current_app

LIMIT = 1_000  # counts stop past this, as on the dashboard's overview ("1k+")
WIDTH = 80


def _count(n: int, capped: bool) -> str:
    if capped:
        return f"{LIMIT // 1000}k+"
    return f"{n / 1000:.1f}k" if n >= 10_000 else str(n)


def _rate(value: float | None) -> str:
    return "-" if value is None else (f"{value:.0f}" if value >= 10 else f"{value:.1f}")


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    if value < 1:
        return f"{value * 1000:.0f}ms"
    return f"{value:.1f}s" if value < 60 else f"{value / 60:.0f}m"


def frame(broker: hailq.Broker) -> Table:
    """One screen: a row a queue, at most ``WIDTH`` columns wide; a long name is cut
    with an ellipsis (``hailq queues --json`` has it whole)."""
    table = Table(box=None, pad_edge=False, padding=(0, 1), expand=False,
                  title=f"hailq top  {time.strftime('%H:%M:%S')}  {broker.url}",
                  title_justify="left")
    table.add_column("QUEUE", max_width=22, no_wrap=True, overflow="ellipsis")
    for name in ("READY", "FLIGHT", "DEAD", "IN/s", "OUT/s", "WAIT99", "LATE", "WRK"):
        table.add_column(name, justify="right", no_wrap=True)
    for glance in broker.overview(LIMIT):
        f, s = glance.figures, glance.figures.stats
        waits = [p.wait_p99 for p in f.priorities if p.wait_p99 is not None]
        late = sum(p.breaches for p in f.priorities)
        name = s.queue + (" ‖" if s.paused else "")
        table.add_row(name, _count(s.ready, "ready" in glance.capped),
                      _count(s.in_flight, "in_flight" in glance.capped),
                      _count(s.dead, "dead" in glance.capped), _rate(f.rates.sent_1m),
                      _rate(f.rates.acked_1m), _seconds(max(waits, default=None)),
                      str(late) if late else "-", f"{f.workers}/{f.desired_workers}")
    return table


@click.command("top")
@click.option("--interval", type=Finite(0.2, 3600.0), default=2.0, show_default=True,
              help="Seconds between refreshes.")
@click.option("--once", is_flag=True, help="Print one screen and exit.")
@common_options
def top_command(interval: float, once: bool) -> None:
    """Every queue on one screen that fits 80 columns, refreshed until Ctrl-C.

    Per queue: READY, in FLIGHT and DEAD messages (past 1,000: "1k+"), messages
    sent (IN/s) and acked (OUT/s) a second over the last minute, WAIT99 the p99
    wait of its slowest priority over the last 5 minutes, LATE the claims past
    their service-level target then, and WRK its workers / desired_workers. A
    paused queue is marked ‖. Only reads.
    """
    app = current_app()
    console = Console(width=WIDTH)
    with app.broker() as broker:
        if once:
            console.print(frame(broker))
            return
        with Live(frame(broker), console=console, auto_refresh=False) as live:
            try:
                while True:
                    time.sleep(interval)
                    live.update(frame(broker), refresh=True)
            except KeyboardInterrupt:
                return
