#!/usr/bin/env python3
"""Throughput per worker-host count on one PostgreSQL server: the scaling curve.

    sudo .venv/bin/python scripts/hosts_curve.py                     # both curves, 3 runs
    sudo .venv/bin/python scripts/hosts_curve.py --curve spread --runs 5 --out curve.json

Needs root (it makes network namespaces; see tests/faults/netns.py). Four "hosts"
are network namespaces on veth pairs; a throwaway PostgreSQL server, pinned to one
core with ``taskset``, listens on their host-side addresses. Each run sends
``--messages`` numbered messages, starts ``hailq worker`` processes in the hosts'
namespaces, and drains the queue; every handler waits ``--work`` seconds (an
I/O-bound check) and writes its effect through the inbox into a ledger table. The
ledger is checked after every run (lost, duplicated, stuck, dead must all be 0).

Two curves:

- ``spread``: the same ``--checkers`` handler slots (``--processes`` × threads)
  spread over 1, 2 and 4 hosts. Shows what spreading costs.
- ``grow``: ``--checkers`` slots *per host* on 1, 2 and 4 hosts. Shows where the
  one server saturates.

Per run: messages/s from the first to the last effect, the busy share of the
server's core and of the whole machine over that window, and what the server's
active sessions waited on (``pg_stat_activity``, sampled 4 times a second). The
printed table gives medians of ``--runs`` runs. Exit status 1 when a ledger is not
clean. Not part of ``make test``; docs/guides/scaling.md quotes its figures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from tests.faults.netns import (  # noqa: E402 - after the path is set
    HostRig,
    hailstorm,
    namespaces_problem,
    start_server,
)

HOST_COUNTS = (1, 2, 4)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--curve", choices=("spread", "grow", "both"), default="both")
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--checkers", type=int, default=50)
    parser.add_argument("--threads", type=int, default=5, help="handler threads per process")
    parser.add_argument("--work", type=float, default=0.05, help="seconds each handler waits")
    parser.add_argument("--out", type=Path, help="write every run as JSON here")
    args = parser.parse_args()
    problem = namespaces_problem()
    if problem:
        print(f"hosts_curve: {problem}", file=sys.stderr)
        return 2
    curves = ("spread", "grow") if args.curve == "both" else (args.curve,)
    runs: list[dict[str, Any]] = []
    clean = True
    rig = HostRig(max(HOST_COUNTS))
    try:
        server = start_server(rig)
        try:
            for run in range(args.runs):
                for curve in curves:
                    for hosts in HOST_COUNTS:
                        checkers = args.checkers * (hosts if curve == "grow" else 1)
                        processes = max(1, checkers // args.threads)
                        name = f"curve_{curve}_{hosts}_{run}"
                        result = hailstorm(
                            rig, server, Path(tempfile.mkdtemp(prefix="hailq-curve-")),
                            hosts=hosts, messages=args.messages, processes=processes,
                            concurrency=args.threads, work=args.work, lease=30.0, name=name,
                            timeout=1800)
                        line = {"curve": curve, "run": run, **result.figures(),
                                "drained": result.drained,
                                "effects_by_host": result.effects_by_host,
                                "waits": result.waits, "locked": result.locked}
                        runs.append(line)
                        print(json.dumps(line), flush=True)
                        if not (result.drained and result.report and result.report.ok):
                            clean = False
                            print(result.tail, file=sys.stderr)
                        server.psql(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        finally:
            server.destroy()
    finally:
        rig.destroy()
    if args.out:
        args.out.write_text(json.dumps(runs, indent=1))
    print_table(runs, curves, args)
    return 0 if clean else 1


def print_table(runs: list[dict[str, Any]], curves: tuple[str, ...],
                args: argparse.Namespace) -> None:
    print(f"\n{args.messages} messages per run, handlers wait {args.work * 1000:g} ms, "
          f"medians of {args.runs} run(s), server pinned to one core; "
          f"{time.strftime('%Y-%m-%d %H:%M')}")
    print("| curve | hosts | checkers | messages/s | of ideal | server core busy | "
          "server ms/msg | worker ms/msg | machine busy | top waits | lost | duplicated |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for curve in curves:
        for hosts in HOST_COUNTS:
            mine = [r for r in runs if r["curve"] == curve and r["hosts"] == hosts]
            if not mine:
                continue
            checkers = mine[0]["processes"] * mine[0]["concurrency"]
            rate = statistics.median(r["rate"] for r in mine)
            ideal = checkers / args.work
            waits: Counter[str] = Counter()
            for r in mine:
                waits.update(r["waits"])
            total = sum(waits.values()) or 1
            top = ", ".join(f"{k} {100 * v / total:.0f}%" for k, v in waits.most_common(3))
            print(f"| {curve} | {hosts} | {checkers} | {rate:.0f} | {rate / ideal:.0%} | "
                  f"{statistics.median(r['server_cpu'] for r in mine):.0%} | "
                  f"{statistics.median(r['server_ms_per_message'] or 0 for r in mine):.2f} | "
                  f"{statistics.median(r.get('worker_ms_per_message') or 0 for r in mine):.2f} | "
                  f"{statistics.median(r['machine_cpu'] for r in mine):.0%} | {top} | "
                  f"{sum(r['lost'] for r in mine)} | {sum(r['duplicated'] for r in mine)} |")


if __name__ == "__main__":
    sys.exit(main())
