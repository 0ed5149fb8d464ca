"""The report: the figures of one run, the invariants they must meet, as text or JSON.

Invariants (any failure makes ``hailq demo`` exit 1): no claim lost, no
effect applied twice, exactly the corrupt claim dead, the statistics program
counted every claim, the crashed checker's claim was redelivered and checked,
the slow checker's late ack was rejected (and no late ack accepted), every
contract's claims were checked in order. The report shows them as *promises*.
Everything else is a *figure*: the makespan and its target (at most 1.25x the
ideal), throughput, waits. Figures depend on the machine as much as on hailq;
they are shown, a missed target is named, but a figure never fails the demo.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from rich.console import Console
from rich.table import Table

TARGET_RATIO = 1.25


def percentile(values: Sequence[float], p: float) -> float | None:
    """The ``p``-th percentile (0-100) by the nearest-rank method; None for no values."""
    if not 0 <= p <= 100:
        raise ValueError(f"percentile must be from 0 to 100, got {p}")
    if not values:
        return None
    ordered = sorted(values)
    rank = max(math.ceil(p / 100 * len(ordered)), 1)
    return ordered[rank - 1]


def ratio(makespan: float, ideal: float) -> float:
    """Makespan as a multiple of the ideal (inf when the ideal is 0)."""
    return makespan / ideal if ideal > 0 else math.inf


def in_order(done: Sequence[tuple[int, float]]) -> bool:
    """True when claims (number, finished at) finished in the order they were numbered."""
    times = [at for _, at in sorted(done)]
    return all(a < b for a, b in itertools.pairwise(times))


@dataclass
class Waits:
    """How long claims waited from being sent to their first check, in seconds."""

    count: int
    p50: float | None
    p99: float | None

    @classmethod
    def of(cls, waits: Sequence[float]) -> Waits:
        return cls(len(waits), percentile(waits, 50), percentile(waits, 99))


@dataclass
class Report:
    """Everything the demo measured; ``invariants`` says which promises held."""

    backend: str
    claims: int
    checkers: int
    scale: float
    check_seconds: float
    lease_seconds: float
    makespan: float
    ideal: float
    send_seconds: float
    results: int
    lost: int
    duplicates: int
    skipped_by_inbox: int
    partial_left: int
    dead: int
    dead_claim_is_corrupt: bool
    redeliveries: int
    crashed_claim: int | None
    crashed_claim_redelivered: bool
    late_acks_rejected: int
    late_acks_accepted: int
    statistics_count: int
    contracts: int
    contracts_in_order: int
    vip_wait: Waits
    normal_wait: Waits
    cpus: int = 0
    load_average: float = 0.0  # 1-minute load when the run ended: other work on the machine
    events: list[str] = field(default_factory=list)

    @property
    def ratio(self) -> float:
        return ratio(self.makespan, self.ideal)

    @property
    def throughput(self) -> float:
        return self.results / self.makespan if self.makespan > 0 else 0.0

    @property
    def invariants(self) -> dict[str, bool]:
        return {
            "lost_0": self.lost == 0,
            "duplicates_0": self.duplicates == 0,
            "no_partial_results": self.partial_left == 0,
            "dead_1_the_corrupt_claim": self.dead == 1 and self.dead_claim_is_corrupt,
            "statistics_count_is_claims": self.statistics_count == self.claims,
            "crashed_claim_redelivered": self.crashed_claim_redelivered,
            "late_ack_rejected": self.late_acks_rejected == 1 and self.late_acks_accepted == 0,
            "contracts_in_order": self.contracts_in_order == self.contracts,
        }

    @property
    def ok(self) -> bool:
        return all(self.invariants.values())

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(ratio=round(self.ratio, 4), target_ratio=TARGET_RATIO,
                    within_target=self.ratio <= TARGET_RATIO,
                    throughput=round(self.throughput, 1), invariants=self.invariants,
                    promises=self.invariants, ok=self.ok)
        return data

    def render(self, console: Console) -> None:
        """The report as tables for a terminal: the promises (any broken one makes the
        demo exit 1), then the figures (measured on this machine; never a failure)."""
        mark = {True: "[green]✓[/]", False: "[red]✗[/]"}
        checks = Table(show_header=True, title="promises (a broken one fails the demo: "
                                               "exit 1)", title_justify="left")
        checks.add_column("")
        checks.add_column("promise")
        checks.add_column("measured")
        shown = {
            "lost_0": f"lost {self.lost}",
            "duplicates_0": f"duplicate results {self.duplicates}",
            "no_partial_results": f"partial results left {self.partial_left}",
            "dead_1_the_corrupt_claim": f"dead {self.dead} (the corrupt claim: "
                                        f"{self.dead_claim_is_corrupt})",
            "statistics_count_is_claims": f"statistics counted {self.statistics_count:,}",
            "crashed_claim_redelivered": f"claim {self.crashed_claim} of the crashed "
                                         "checker checked again",
            "late_ack_rejected": f"late acks rejected {self.late_acks_rejected}, "
                                f"accepted {self.late_acks_accepted}",
            "contracts_in_order": f"{self.contracts_in_order}/{self.contracts} contracts "
                                  "in order",
        }
        for name, held in self.invariants.items():
            checks.add_row(mark[held], name.replace("_", " "), shown[name])
        run = Table(title=f"figures of hailq demo on {self.backend}: {self.claims:,} "
                          f"claims, {self.checkers} checkers, time ×{self.scale:g} (this "
                          "machine's; they never fail the demo)",
                    show_header=False, title_justify="left")
        run.add_column(style="bold")
        run.add_column()
        target = ("within the target" if self.ratio <= TARGET_RATIO else
                  "[yellow]above the target[/] (a figure of this machine and its load, "
                  "not a broken promise)")
        run.add_row("makespan", f"{self.makespan:.2f} s = {self.ratio:.3f}× the ideal "
                    f"{self.ideal:.2f} s ({self.claims:,} × {1000 * self.check_seconds:g} ms"
                    f" / {self.checkers}); target ≤ {TARGET_RATIO}×: {target}")
        run.add_row("throughput", f"{self.throughput:,.0f} claims/s; burst sent in "
                    f"{self.send_seconds:.2f} s")
        run.add_row("machine", f"{self.cpus} CPUs, load average {self.load_average:.1f}")
        run.add_row("waits VIP", _waits(self.vip_wait))
        run.add_row("waits normal", _waits(self.normal_wait))
        run.add_row("redeliveries", f"{self.redeliveries} (crash, slow checker, corrupt photo)")
        run.add_row("inbox", f"{self.skipped_by_inbox} repeated check(s) skipped")
        console.print(run)
        console.print(checks)
        console.print("[bold green]every promise held[/] (exit 0)" if self.ok
                      else "[bold red]a promise was broken[/] (exit 1)")


def _waits(w: Waits) -> str:
    if w.p50 is None or w.p99 is None:
        return "none"
    return f"p50 {1000 * w.p50:,.0f} ms, p99 {1000 * w.p99:,.0f} ms ({w.count:,} claims)"
