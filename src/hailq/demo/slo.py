"""``hailq demo --slo``: deadline order against strict priority and aging, simulated and
live in scaled time (SPEC rule 41, docs/concepts/priorities.md).

The load is the published scenario (``hailq.policy.simulation.scenario``: targets
``{9: 60, 5: 120, 0: 600}`` s, priority 0 at 4/s and priority 5 at 6/s for 15 minutes,
a priority-9 wave of 14/s for 200 s, 3 s handlers). The steps:

1. The pool ``desired_workers`` names for it: ``smallest_pool`` (what sizes a queue in
   deadline order) over the whole load known in advance, with 3 s handlers.
2. Live, deadline order at that size. Besides the waits it measures the *service
   time*: how long a slot is taken per message while messages wait (the handler, and
   the ack and fetch around it: a few percent of a scaled handler). Where the run
   breaches a target, ``smallest_pool`` names a pool again with the longest service
   time measured so far (at least one slot more), and deadline order runs live there,
   until a run meets every target: what an autoscaler that follows
   ``desired_workers`` does.
3. At that size, live: strict priority, aging by the best value the simulation at the
   measured service time finds there (1 to 120 s a level); and deadline order one
   slot fewer.

Every row is simulated too (3 s handlers, and the measured service time). Time runs
``scale`` times faster: handlers and targets are divided by it, waits reported in
story seconds. The outcome is a figure (it depends on the machine): the demo fails
only when a run could not handle every message.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import hailq
from hailq.demo.run import SWITCH_INTERVAL
from hailq.demo.slo_live import LiveRun, run_live
from hailq.policy.pool import Need, Waiting, smallest_pool
from hailq.policy.simulation import (
    SCENARIO_HANDLER,
    SLO_SCENARIO,
    ClassResult,
    Job,
    Order,
    Result,
    scenario,
    simulate,
)

DEFAULT_SCALE = 10.0  # a run of the 15-minute load takes 90 s
AGING_VALUES = range(1, 121)  # seconds a level tried for the best aging
MAX_STEPS = 6  # pools named in turn at most before the comparison runs at the last


@dataclass(frozen=True)
class SloRow:
    """One pool and order: simulated with 3 s handlers, with the measured service time,
    and live (None: not run live)."""

    order: Order
    slots: int
    role: str  # what the row shows
    simulated: Result
    at_service: Result | None
    live: LiveRun | None

    @property
    def label(self) -> str:
        name = f"aging {self.order.aging:g} s" if self.order.name == "aging" else \
            self.order.name
        return f"{name}, {self.slots}"


@dataclass
class SloReport:
    """What ``hailq demo --slo`` found, and whether it shows what it set out to."""

    backend: str
    scale: float
    seed: int
    messages: int
    slo: dict[int, float]
    desired_simulated: int  # smallest_pool with 3 s handlers
    service: float | None  # the longest story seconds a slot took per message
    desired_live: int  # the first pool named that met every target live
    best_aging: float
    # At desired_live, simulated at the measured service time: no aging value meets all.
    every_aging_breaches: bool
    rows: list[SloRow]
    seconds: float  # the whole demo, wall clock

    @property
    def complete(self) -> bool:
        """Every live run handled every message."""
        return all(r.live is None or r.live.complete for r in self.rows)

    def row(self, order: str, slots: int) -> SloRow | None:
        return next((r for r in self.rows if r.order.name == order and r.slots == slots
                     and r.live is not None), None)

    def shows(self) -> dict[str, bool]:
        """The claims of docs/concepts/priorities.md, as the live runs bear them out."""
        n = self.desired_live
        deadline, fewer = self.row("deadline", n), self.row("deadline", n - 1)
        strict, aging = self.row("strict", n), self.row("aging", n)

        def met(r: SloRow | None) -> bool:
            return r is not None and r.live is not None and r.live.breaches == 0

        def missed(r: SloRow | None) -> bool:
            return r is not None and r.live is not None and r.live.breaches > 0

        return {"deadline_meets_every_target": met(deadline),
                "strict_breaches": missed(strict),
                "best_aging_breaches": missed(aging) and self.every_aging_breaches,
                "one_fewer_breaches": missed(fewer)}

    def to_json(self) -> dict[str, Any]:
        def classes(r: Result | LiveRun | None) -> list[dict[str, Any]] | None:
            if r is None:
                return None
            return [{"priority": c.priority, "target": c.target, "messages": c.messages,
                     "breaches": c.breaches, "p99_wait": round(c.p99_wait, 2),
                     "max_wait": round(c.max_wait, 2)} for c in r.classes]

        return {"backend": self.backend, "scale": self.scale, "seed": self.seed,
                "messages": self.messages, "slo": self.slo,
                "desired_workers_simulated": self.desired_simulated,
                "service_seconds": None if self.service is None else round(self.service, 3),
                "desired_workers_live": self.desired_live, "best_aging": self.best_aging,
                "every_aging_breaches": self.every_aging_breaches,
                "rows": [{"order": r.order.name, "aging": r.order.aging or None,
                          "slots": r.slots, "role": r.role,
                          "simulated": classes(r.simulated),
                          "simulated_at_service": classes(r.at_service),
                          "live": classes(r.live),
                          "live_seconds": None if r.live is None else round(r.live.seconds, 1),
                          "live_complete": None if r.live is None else r.live.complete}
                         for r in self.rows],
                "shows": self.shows(), "complete": self.complete,
                "seconds": round(self.seconds, 1)}


def desired_for(jobs: Sequence[Job], handler: float) -> int:
    """Handler slots ``smallest_pool`` (the pool ``desired_workers`` names for a queue in
    deadline order) needs for the whole load, known in advance, at ``handler`` s each."""
    need = Need(now=0.0, slo=SLO_SCENARIO, handler_time=handler,
                ready=[Waiting(j.priority, j.at) for j in jobs])
    return smallest_pool(need).slots


def best_aging(jobs: Sequence[Job], slots: int) -> tuple[float, bool]:
    """The aging value (s a level) with the fewest simulated breaches at ``slots``, and
    whether every value tried breaches some target."""
    tried = []
    for a in AGING_VALUES:
        tried.append((simulate(jobs, slots, Order("aging", a), SLO_SCENARIO).breaches, a))
        if tried[-1][0] == 0:  # the smallest value that meets every target
            return float(a), False
    return float(min(tried)[1]), True


def run_slo(url: str, backend: str, scale: float = DEFAULT_SCALE, seed: int = 1,
            on_event: Callable[[str], None] | None = None, steps: int = MAX_STEPS,
            ) -> SloReport:
    """The whole comparison on the broker at ``url`` (each run on a queue of its own);
    ``steps``: pools named in turn at most before the comparison runs at the last."""
    began = time.monotonic()
    say = on_event or (lambda _: None)
    jobs = scenario(seed)
    simulated = desired_for(jobs, SCENARIO_HANDLER)
    say(f"{len(jobs)} messages; simulated, deadline order meets every target from "
        f"{simulated} slots (smallest_pool, 3 s handlers)")
    broker = hailq.connect(url)
    # As the hailstorm's run: with dozens of slot threads a shorter switch interval lets
    # a thread whose sleep (the handler) ended run again sooner.
    previous = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL)
    try:
        live: dict[tuple[str, float, int], LiveRun] = {}

        def play(order: Order, slots: int) -> LiveRun:
            key = (order.name, order.aging, slots)
            if key not in live:
                name = f"slo-{order.name}-{order.aging:g}-{slots}"
                live[key] = run_live(broker, name, jobs, slots, order, SLO_SCENARIO, scale)
                r = live[key]
                say(f"live {order.name}{f' {order.aging:g} s' if order.aging else ''}, "
                    f"{slots} slots: " + ", ".join(
                        f"p{c.priority} {c.breaches} breaches" for c in r.classes)
                    + f" ({r.seconds:.0f} s)")
            return live[key]

        # As an autoscaler following desired_workers: run the size it names, and where
        # that run breaches, name again from the longest service time measured so far.
        needed, service = simulated, None
        for _ in range(max(steps, 1)):
            run = play(Order("deadline"), needed)
            if run.service is not None:
                service = max(service or 0.0, run.service)
            if run.breaches == 0:
                break
            again = max(desired_for(jobs, service) if service else needed, needed + 1)
            say(f"measured service time {service or SCENARIO_HANDLER:.3f} s a message: "
                f"smallest_pool names {again} slots")
            needed = again
        # The simulation that the live run follows is the one at the measured service
        # time: the best aging is sought there.
        timed = [replace(j, handler=service) for j in jobs] if service else None
        aging, every = best_aging(timed or jobs, needed)
        plan = [(Order("strict"), needed, "compared"),
                (Order("aging", aging), needed, "compared (best aging)"),
                (Order("deadline"), needed, "desired_workers"),
                (Order("deadline"), needed - 1, "one fewer")]
        plan += [(Order("deadline"), n, "desired_workers named before")
                 for (name, _, n) in sorted(live) if name == "deadline"
                 and n not in (needed, needed - 1)]
        rows = []
        for order, slots, role in plan:
            rows.append(SloRow(
                order, slots, role, simulate(jobs, slots, order, SLO_SCENARIO),
                simulate(timed, slots, order, SLO_SCENARIO) if timed else None,
                play(order, slots)))
    finally:
        sys.setswitchinterval(previous)
        broker.close()
    return SloReport(backend=backend, scale=scale, seed=seed, messages=len(jobs),
                     slo=dict(SLO_SCENARIO), desired_simulated=simulated, service=service,
                     desired_live=needed, best_aging=aging, every_aging_breaches=every,
                     rows=rows, seconds=time.monotonic() - began)


def cell(c: ClassResult) -> str:
    """``breaches / p99 wait`` as the docs' table shows it."""
    return f"{c.breaches} / {c.p99_wait:.0f} s"


def table(report: SloReport) -> list[str]:
    """The report as the Markdown table of docs/concepts/priorities.md: per row, priority
    9, 5 and 0 simulated with 3 s handlers, simulated with the measured service time,
    and live."""
    service = f"{report.service:.2f}" if report.service else "-"
    head = ["| order, slots | simulated, 3 s: p9 | p5 | p0 | simulated, "
            f"{service} s: p9 | p5 | p0 | live: p9 | p5 | p0 |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    lines = []
    for r in report.rows:
        halves = [[cell(c) for c in h.classes] if h is not None else ["-"] * 3
                  for h in (r.simulated, r.at_service, r.live)]
        lines.append(f"| {r.label} | " + " | ".join(c for h in halves for c in h) + " |")
    return head + lines
