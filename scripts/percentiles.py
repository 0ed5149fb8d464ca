"""Reported against exact percentiles (rule 36), through the whole path: a loop of its own
sends, receives and acks messages whose waits and handler times are known exactly (an
injected clock on SQLite moves to each one), the broker's recorder writes them, and
``queue.figures()`` reads them back. Prints one line per distribution and figure:

    python scripts/percentiles.py [--n 2000] [--seed 7]

Deterministic for a seed. See docs/operations/monitoring.md.
"""

from __future__ import annotations

import argparse
import random
import tempfile
from collections.abc import Callable
from pathlib import Path

import hailq
from hailq.observe.sketch import exact_percentile

DAY = 86400.0
T = 1_800_000_000.0  # the broker's clock when each message is received


def uniform(r: random.Random) -> float:
    return r.uniform(0.001, 60.0)


def bimodal(r: random.Random) -> float:
    return max(r.gauss(0.05, 0.01), 0.001) if r.random() < 0.9 else r.uniform(5.0, 30.0)


def heavy_tailed(r: random.Random) -> float:
    return min(0.01 * r.paretovariate(1.2), DAY)


def run(name: str, draw: Callable[[random.Random], float], n: int, seed: int,
        folder: Path) -> list[str]:
    r = random.Random(seed)
    waits = [draw(r) for _ in range(n)]
    handlers = [draw(r) for _ in range(n)]
    clock = [T]
    broker = hailq.connect(f"sqlite:///{folder / name}.db", clock=lambda: clock[0])
    try:
        q = broker.queue(name)
        for wait, handler in zip(waits, handlers, strict=True):
            clock[0] = T - wait  # sent (and available) ``wait`` seconds before T
            q.send({"wait": wait})
            clock[0] = T
            [m] = q.receive(1, lease=43200)  # a longer handler acks late: still acked
            clock[0] = T + handler
            m.ack()
        clock[0] = T + 1.0
        broker.close()  # writes the figures
        broker = hailq.connect(f"sqlite:///{folder / name}.db", clock=lambda: clock[0])
        [p] = broker.get_queue(name).figures().priorities
    finally:
        broker.close()
    lines = []
    for kind, values in (("wait", waits), ("handler", handlers)):
        for q_, label in ((0.5, "p50"), (0.95, "p95"), (0.99, "p99")):
            exact = exact_percentile(values, q_)
            reported = getattr(p, f"{kind}_{label}")
            error = (reported - exact) / exact
            lines.append(f"| {name} | {kind} {label} | {exact:.4f} | {reported:.4f} "
                         f"| {error * 100:+.2f} % |")
        lines.append(f"| {name} | {kind} max | {max(values):.4f} | "
                     f"{getattr(p, f'{kind}_max'):.4f} | |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="messages per distribution")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    print(f"| distribution ({args.n} messages) | figure | exact (s) | reported (s) | error |")
    print("| --- | --- | ---: | ---: | ---: |")
    with tempfile.TemporaryDirectory() as tmp:
        for name, draw in (("uniform", uniform), ("bimodal", bimodal),
                           ("heavy-tailed", heavy_tailed)):
            for line in run(name, draw, args.n, args.seed, Path(tmp)):
                print(line)


if __name__ == "__main__":
    main()
