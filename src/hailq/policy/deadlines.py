"""Deadline order (SPEC rule 41), the pure part: each priority's target and the key.

A queue in deadline order serves first the message whose deadline comes first: its
``available_at`` plus its priority's service-level target. It is aging with a
per-priority offset (``available_at + T(p)`` instead of ``available_at - p * A``),
so the ready index, re-sorts, nacks and redrives keep their shape.

A priority without a target of its own gets one from its neighbours, so that
priority 8 does not tie with priority 0 just because only 9 and 0 have targets:

- between two priorities with targets, the target is interpolated geometrically
  (targets usually span orders of magnitude: 10 s for 9 and 3,600 s for 0 put 5 at
  137 s, where a straight line would put it at 1,606 s);
- above the highest priority with a target, that target; below the lowest, that one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

PRIORITIES = range(10)


def targets_of(slo: Mapping[int, float]) -> tuple[float, ...]:
    """The target of every priority 0 … 9 (index = priority), filled in as the module
    says; ``slo`` must name at least one priority."""
    if not slo:
        raise ValueError("deadline order needs at least one service-level target")
    named = sorted(slo.items())
    out: list[float] = []
    for p in PRIORITIES:
        if p in slo:
            out.append(float(slo[p]))
            continue
        below = [(q, t) for q, t in named if q < p]
        above = [(q, t) for q, t in named if q > p]
        if not below:
            out.append(float(above[0][1]))
        elif not above:
            out.append(float(below[-1][1]))
        else:
            (q0, t0), (q1, t1) = below[-1], above[0]
            share = (p - q0) / (q1 - q0)
            out.append(math.exp(math.log(t0) + share * (math.log(t1) - math.log(t0))))
    return tuple(out)


def deadline(priority: int, available_at: float, targets: tuple[float, ...]) -> float:
    """When a message of ``priority`` that became receivable at ``available_at`` is
    due: its sort key in deadline order (smaller first, ties by send sequence)."""
    return available_at + targets[priority]
