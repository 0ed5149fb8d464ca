"""The simulated half of docs/concepts/priorities.md's table: one load (steady normal
and bulk work, then a wave of urgent messages) through pools of handler slots in
strict priority, aging (each value from 1 to 120 s a level, the best kept) and
deadline order (hailq.policy.simulation, seeded).

    .venv/bin/python scripts/slo_scenario.py --seeds 1 2 3
"""

from __future__ import annotations

import argparse

from hailq.policy.simulation import SLO_SCENARIO, Order, Result, scenario, simulate


def row(label: str, r: Result) -> str:
    cells = " | ".join(f"{c.breaches} / {c.p99_wait:.0f} s" for c in r.classes)
    return f"| {label} | {cells} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--slots", type=int, default=44)
    args = parser.parse_args()
    for seed in args.seeds:
        jobs = scenario(seed)
        smallest = next(n for n in range(1, 200)
                        if simulate(jobs, n, Order("deadline"), SLO_SCENARIO).breaches == 0)
        print(f"\nseed {seed}: {len(jobs)} messages; deadline order meets every target "
              f"from {smallest} slots on")
        print("| order, slots | priority 9 | priority 5 | priority 0 |\n|---|---|---|---|")
        for slots in sorted({args.slots, smallest, smallest - 1}):
            print(row(f"strict, {slots}", simulate(jobs, slots, Order("strict"),
                                                   SLO_SCENARIO)))
            aged = [(simulate(jobs, slots, Order("aging", a), SLO_SCENARIO), a)
                    for a in range(1, 121)]
            best, a = min(aged, key=lambda r: (r[0].breaches, r[1]))
            print(row(f"aging {a} s (best), {slots}", best))
            print(row(f"deadline, {slots}", simulate(jobs, slots, Order("deadline"),
                                                     SLO_SCENARIO)))


if __name__ == "__main__":
    main()
