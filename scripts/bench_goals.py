"""The project's development goals, checked against a ``hailq bench --json`` file.

    hailq bench --runs 3 --json bench.json
    .venv/bin/python scripts/bench_goals.py bench.json


How they are read is written in docs/performance.md: the ratio goal is for the
one-message cycle (``receive()`` then ``ack()``), the throughput goal may be met in
batches where a backend needs them (PostgreSQL: one round trip per statement). The
storage core's goals: PostgreSQL sends one by one at 0.8 of the bare insert+commit
loop, a drain after single sends within 5 % of the drain after ``send_many``, and
send → handler start within the workers' targets.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hailq.bench.runner import SAME_ROW, Figure

MIN_RATIO = 0.5  # receive+ack against the bare driver
MIN_RATE_4 = 6_000.0  # receive+acks a second with 4 consumer processes
MAX_GROWTH = 1.5  # receive latency, largest backlog against the smallest
MAX_OVERVIEW_MS = 300.0  # the dashboard's overview over 100 queues x 10,000 messages
MIN_SEND_RATIO_PG = 0.8  # PostgreSQL sends one by one against the bare insert+commit loop
MIN_FILL_RATIO = 0.95  # the drain after single sends against the one after send_many
MIN_FIGURES_RATIO = 0.95  # a drain with every consumer's figures against one without
MIN_SHARED = 3.0  # 16 threads or 100 coroutines sending singly, against one thread
MIN_SHARED_RAW = 1.5  # the same, against PostgreSQL's bare insert loop
MIN_ASYNC_PG = 0.83  # hailq.aio's receive+ack, one message a cycle (at most 1.2x the sync)
MIN_ASYNC_SQLITE = 0.67  # hailq.aio's receive+ack, batches of 10 (at most 1.5x the sync)


@dataclass(frozen=True)
class Goal:
    """One goal: what it asks, what was measured, and whether that meets it."""

    name: str
    measured: str
    met: bool


def check_goals(figures: Sequence[Figure], *, postgres: bool = False) -> list[Goal]:
    """The goals the figures can answer; none for a part that was not measured.
    ``postgres``: the figures are PostgreSQL's (its send goal is its own)."""
    by_name = {f.name: f for f in figures}
    goals: list[Goal] = []
    sends = by_name.get("send, one by one")
    # Judged against the loop that stores the same row where it was measured
    # (docs/performance.md says why), the minimal table's ratio beside it.
    same_row = by_name.get(SAME_ROW)
    judged = same_row or sends
    if postgres and judged is not None:
        beside = (f" ({sends.ratio:.2f} against the minimal table)"
                  if same_row is not None and sends is not None else "")
        goals.append(Goal(f"send one by one ≥ {MIN_SEND_RATIO_PG:g} × bare insert+commit "
                          + ("of the same row" if same_row is not None else "loop"),
                          f"{judged.ratio:.2f}{beside}", judged.ratio >= MIN_SEND_RATIO_PG))
    one = [by_name[n] for n in ("receive+ack, 1 consumer, batch 1",
                                "receive+ack, 4 consumers (processes), batch 1") if n in by_name]
    if one:
        goals.append(Goal(f"receive+ack ≥ {MIN_RATIO:g} × bare driver, one message a cycle",
                          ", ".join(f"{f.ratio:.2f}" for f in one),
                          all(f.ratio >= MIN_RATIO for f in one)))
    four = [f for f in figures if f.name.startswith("receive+ack, 4 consumers")]
    if four:
        goals.append(Goal(f"4 consumer processes ≥ {MIN_RATE_4:,.0f} msgs/s",
                          ", ".join(f"{f.hailq:,.0f} ({f.name.rsplit(', ', 1)[1]})"
                                    for f in four),
                          any(f.hailq >= MIN_RATE_4 for f in four)))
    waits = [f for f in figures if f.name.startswith("receive latency")]
    if len(waits) >= 2 and waits[0].hailq > 0:
        growth = waits[-1].hailq / waits[0].hailq
        backlogs = [f.name.split(", ")[1].removesuffix(" waiting") for f in (waits[-1], waits[0])]
        goals.append(Goal(f"receive latency, {backlogs[0]} vs {backlogs[1]} waiting "
                          f"≤ {MAX_GROWTH:g}×", f"{growth:.2f}×", growth <= MAX_GROWTH))
    for f in figures:
        if f.name.startswith("overview "):
            goals.append(Goal(f"{f.name} < {MAX_OVERVIEW_MS:g} ms", f"{f.hailq:.0f} ms",
                              f.hailq < MAX_OVERVIEW_MS))
    for f in figures:
        if f.name.startswith("worker drain") and "single-send fill" in f.name:
            goals.append(Goal(f"drain after single sends ≥ {MIN_FILL_RATIO:g} × drain after "
                              "send_many", f"{f.ratio:.2f}", f.ratio >= MIN_FILL_RATIO))
        elif f.name.startswith("send→handler start") and f.name.endswith("(vs target)"):
            goals.append(Goal(f"{f.name.removesuffix(' (vs target)')} ≤ {f.raw:g} ms",
                              f"{f.hailq:.2f} ms", f.hailq <= f.raw))
    for f in figures:  # rule 36: counting every claim and ack costs at most 5 %
        if f.name.startswith("drain with figures"):
            goals.append(Goal(f"{f.name.replace(' (vs without)', '')} ≥ {MIN_FIGURES_RATIO:g} × "
                              "without", f"{f.ratio:.2f}", f.ratio >= MIN_FIGURES_RATIO))
    for f in figures:  # producers that share commits (issue 34, point 6)
        if f.name.startswith("send from ") and " (vs " in f.name:
            least = MIN_SHARED_RAW if f.name.endswith("bare insert loop)") else MIN_SHARED
            name = f.name.removesuffix(")").replace(" (vs ", f" ≥ {least:g} × ")
            goals.append(Goal(name, f"{f.ratio:.2f}", f.ratio >= least))
    asked = "async receive+ack, batch 1 (vs sync)" if postgres \
        else "async receive+ack, batch 10 (vs sync)"
    if asked in by_name:  # hailq.aio against the sync API, same run (issue 34, point 7)
        least = MIN_ASYNC_PG if postgres else MIN_ASYNC_SQLITE
        goals.append(Goal(f"{asked.removesuffix(' (vs sync)')} ≥ {least:g} × sync",
                          f"{by_name[asked].ratio:.2f}", by_name[asked].ratio >= least))
    held = [f for f in figures if f.name.startswith("rate ") and "started/s" in f.name]
    for f in held:  # rule 33: the limit (f.raw) held within 10% by 4 worker processes
        goals.append(Goal(f"rate limit {f.raw:g}/s held within ±10% by 4 processes",
                          f"{f.hailq:.1f}/s", 0.9 * f.raw <= f.hailq <= 1.1 * f.raw))
    return goals


def render_goals(goals: Sequence[Goal]) -> str:
    """The goals as lines under a backend's tables; empty when there are none."""
    if not goals:
        return ""
    lines = ["goals"] + [f"  {'met' if g.met else 'NOT met':<8}{g.name}: {g.measured}"
                         for g in goals]
    return "\n" + "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Print each backend's goals, met or not; exit 1 when one is not met."""
    import argparse
    import json
    from pathlib import Path

    parser = argparse.ArgumentParser(description="hailq bench's figures against the goals")
    parser.add_argument("report", type=Path, help="the file of hailq bench --json FILE")
    args = parser.parse_args(argv)
    report = json.loads(args.report.read_text())
    missed = False
    for backend, rows in report["backends"].items():
        figures = [Figure(r["name"], r["unit"], r["hailq"], r["raw"], r.get("runs", []),
                          r.get("raw_runs", [])) for r in rows]
        goals = check_goals(figures, postgres=backend.startswith("postgres"))
        print(backend + render_goals(goals))
        missed = missed or not all(g.met for g in goals)
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
