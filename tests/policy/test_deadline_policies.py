"""Deadline order's pure parts (SPEC rule 41): targets per priority, the simulated pool,
and the smallest pool, checked by hand and against brute force, without a database."""

from __future__ import annotations

from itertools import pairwise, permutations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hailq.policy.deadlines import deadline, targets_of
from hailq.policy.pool import Need, Waiting, smallest_pool
from hailq.policy.simulation import (
    SLO_SCENARIO,
    Job,
    Order,
    Stream,
    arrivals,
    scenario,
    simulate,
)

DEADLINE, STRICT = Order("deadline"), Order("strict")


def test_rule_41_named_targets_are_kept_and_the_others_interpolated_geometrically() -> None:
    t = targets_of({9: 10, 0: 3600})
    assert t[9] == 10 and t[0] == 3600
    assert t[5] == pytest.approx(3600 * (10 / 3600) ** (5 / 9))  # 137 s, not 1,606
    assert all(a > b for a, b in pairwise(t))  # 8 no longer ties with 0
    t = targets_of({5: 60, 2: 600})
    assert t[9] == t[6] == 60 and t[0] == t[1] == 600  # outside: the nearest target
    assert deadline(9, 100.0, targets_of({9: 10})) == 110.0
    with pytest.raises(ValueError):
        targets_of({})


def test_strict_order_starves_what_deadline_order_serves_in_time() -> None:
    # One slot, 1 s handlers: ten urgent messages (target 20 s) and one normal one
    # (target 5 s) that arrived first. Strict priority runs it last, 10 s late.
    jobs = [Job(0.0, 5, 1.0)] + [Job(0.0, 9, 1.0) for _ in range(10)]
    slo = {9: 20.0, 5: 5.0}
    strict = simulate(jobs, 1, STRICT, slo)
    assert strict.breaches == 1 and strict.classes[1].max_wait == 10.0
    assert simulate(jobs, 1, DEADLINE, slo).breaches == 0


def test_a_key_runs_one_message_at_a_time_and_a_rate_spaces_starts() -> None:
    jobs = [Job(0.0, 0, 2.0, "k"), Job(0.0, 0, 2.0, "k"), Job(0.0, 0, 2.0, None)]
    waits = simulate(jobs, 3, STRICT, {0: 1.0})
    assert waits.classes[0].max_wait == 2.0 and waits.breaches == 1  # the key's second
    spaced = simulate([Job(0.0, 0, 0.1) for _ in range(5)], 5, STRICT, {0: 1.0}, rate=2.0)
    assert spaced.classes[0].max_wait == pytest.approx(2.0)  # starts 0.5 s apart


def _brute_force_slots(ages: list[tuple[int, float]], slo: dict[int, float],
                       h: float) -> int | None:
    """Fewest slots with which SOME order starts every message by its deadline, all
    messages waiting at time 0 with handlers of ``h`` seconds; None: no pool can."""
    targets = targets_of(slo)
    due = [targets[p] - age for p, age in ages]
    for slots in range(1, len(ages) + 1):
        for perm in permutations(range(len(ages))):
            if all((i // slots) * h <= due[j] + 1e-9 for i, j in enumerate(perm)):
                return slots
    return None


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0, 3, 5, 9]),
                          st.floats(0.0, 30.0).map(lambda x: round(x, 1))),
                min_size=1, max_size=6),
       st.sampled_from([{9: 5.0, 5: 20.0, 0: 60.0}, {9: 2.0, 0: 12.0}, {5: 8.0}]),
       st.sampled_from([1.0, 2.5]))
def test_rule_41_smallest_pool_matches_brute_force(ages: list[tuple[int, float]],
                                           slo: dict[int, float], h: float) -> None:
    now = 1000.0
    need = Need(now=now, slo=slo, handler_time=h,
                ready=[Waiting(p, now - age) for p, age in ages])
    answer = smallest_pool(need)
    expected = _brute_force_slots(ages, slo, h)
    if expected is None:
        assert not answer.met and answer.reason is not None
    else:
        assert answer.met and answer.slots == expected


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**16), st.integers(1, 12))
def test_more_slots_never_breach_more_in_deadline_order(seed: int, slots: int) -> None:
    jobs = arrivals([Stream(9, 2.0, 0.0, 20.0), Stream(0, 3.0, 0.0, 30.0)], 1.5, seed)
    slo = {9: 3.0, 0: 10.0}
    fewer = simulate(jobs, slots, DEADLINE, slo).breaches
    assert simulate(jobs, slots + 1, DEADLINE, slo).breaches <= fewer


def test_rule_41_no_pool_says_why_and_names_the_largest_useful_one() -> None:
    now, slo = 100.0, {9: 10.0, 0: 60.0}
    late = smallest_pool(Need(now=now, slo=slo, handler_time=1.0,
                              ready=[Waiting(9, now - 30.0), Waiting(0, now, count=4)]))
    assert not late.met and late.reason is not None and late.reason.startswith("late")
    chain = smallest_pool(Need(now=now, slo={0: 5.0}, handler_time=2.0,
                               ready=[Waiting(0, now, count=4, key="claim-4711")]))
    assert not chain.met and chain.reason is not None and "key chain" in chain.reason
    assert chain.slots == 1  # a second slot cannot run the key's next message earlier
    capped = smallest_pool(Need(now=now, slo={0: 1.0}, handler_time=1.0,
                                ready=[Waiting(0, now, count=12)], max_in_flight=4))
    assert not capped.met and capped.slots == 4
    assert capped.reason is not None and "max_in_flight" in capped.reason
    limited = smallest_pool(Need(now=now, slo={0: 1.0}, handler_time=1.0,
                                 ready=[Waiting(0, now, count=8)], rate=2.0))
    assert not limited.met and limited.reason is not None and "rate limit" in limited.reason


def test_arrivals_and_processes_size_the_pool() -> None:
    # 10 a second of 1 s handlers keep 10 slots busy however loose the target.
    steady = smallest_pool(Need(now=0.0, slo={0: 600.0}, handler_time=1.0,
                                arrival_rates={0: 10.0}, concurrency=4))
    assert steady.met and steady.slots >= 10 and steady.workers == -(-steady.slots // 4)
    idle = smallest_pool(Need(now=0.0, slo={0: 60.0}, handler_time=1.0))
    assert idle.met and idle.workers == 0


def test_rule_41_the_published_load_separates_the_orders() -> None:
    """docs/concepts/priorities.md: at 44 slots strict priority breaches priority 5,
    deadline order meets every target, and no aging value meets them all."""
    jobs = scenario(seed=1)
    strict = simulate(jobs, 44, STRICT, SLO_SCENARIO)
    assert strict.breaches > 0 and {c.priority for c in strict.classes if c.breaches} == {5}
    assert simulate(jobs, 44, DEADLINE, SLO_SCENARIO).breaches == 0
    assert all(simulate(jobs, 44, Order("aging", a), SLO_SCENARIO).breaches > 0
               for a in range(3, 97, 3))
