"""The autoscaler's decision (rule 24) on its own: traces replayed through the pure
function, no database, no process. See hailq/policy/autoscale.py."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from hailq import InvalidArgument
from hailq.policy.autoscale import Decision, Limits, Observation, State, decide

TRACES: dict[str, Any] = json.loads((Path(__file__).parent / "traces.json").read_text())


def replay(name: str) -> list[Decision]:
    """Run a trace: each tick observes the curve at the current size; the window after a
    change is unsettled (its processes were starting or stopping), as in the real loop."""
    trace = TRACES[name]
    limits = Limits(**trace["limits"])
    curve = {int(k): v for k, v in trace["curve"].items()}
    ticks = trace["ticks"]
    noise = ticks.get("noise", [1.0])
    interval = trace["interval"]
    n, state, changed = int(trace.get("start", 1)), State(), False
    ready, decisions = ticks["ready"], []
    for i in range(ticks["repeat"]):
        tput, handler = curve[min(max(n, 1), max(curve))] if n else (0, None)
        done = round(tput * noise[i % len(noise)] * interval)
        obs = Observation(workers=n, settled=not changed, elapsed=interval, completed=done,
                          sent=0, handler_time=handler, ready=ready,
                          in_flight=min(n * limits.concurrency, ready),
                          slo=tuple(trace["slo"]), rate=trace.get("rate"))
        d = decide(state, obs, limits)
        decisions.append(d)
        changed, n, state = d.workers != n, d.workers, d.state
        ready += ticks.get("grows", 0)
    return decisions


def sizes(decisions: list[Decision]) -> list[int]:
    return [d.workers for d in decisions]


def test_rule_24_a_backlog_grows_the_pool_from_one_step_by_step() -> None:
    run = sizes(replay("growth_from_one"))
    assert run[0] == 2  # the first tick already probes
    assert all(b - a in (0, 1) for a, b in itertools.pairwise(run))  # one at a time
    assert run[-1] == 10 and max(run) == 10  # up to --max, never beyond


def test_rule_24_a_saturated_downstream_stops_growth_at_its_point_not_at_max() -> None:
    decisions = replay("saturated_downstream")
    run = sizes(decisions)
    assert max(run) == 5  # probed one above the point, never further
    settled = run[len(run) // 3:]
    assert settled.count(4) >= 0.8 * len(settled)  # mostly at the point, probing rarely
    rejected = [d for d in decisions if d.reason.startswith("saturated at 4")]
    assert rejected and all(d.ceiling == 4 for d in rejected)
    assert any("at the saturation point 4" in d.reason for d in decisions)


def test_rule_24_a_drowning_database_is_not_fed_more_writers() -> None:
    # Throughput falls beyond 4 (the hailstorm's results database): the pool stays there.
    run = sizes(replay("drowning_results_database"))
    assert max(run) == 5 and run[-1] == 4


def test_rule_24_noise_at_a_plateau_is_not_taken_for_gain() -> None:
    run = sizes(replay("noisy_plateau"))
    assert max(run) <= 5
    assert run[len(run) // 3:].count(4) >= 0.7 * len(run[len(run) // 3:])


def test_rule_24_an_empty_queue_returns_the_pool_to_min() -> None:
    decisions = replay("empty_queue")
    run = sizes(decisions)
    assert run[0] == 6  # one calm tick first: not on a single empty window
    assert run[-1] == 1 and min(run) == 1
    assert any(d.action == "shrink" and "queue empty" in d.reason for d in decisions)


def test_rule_24_a_rate_limited_queue_gets_no_more_workers_and_no_saturation_point() -> None:
    decisions = replay("rate_limited")
    run = sizes(decisions)
    # 10/s x 0.25 s keeps 2.5 processes busy: 3, however the backlog grows.
    assert max(run) == 3 and run[-1] == 3
    assert all(d.ceiling is None for d in decisions)
    assert "rate-limited" in decisions[-1].reason


def window(**changes: Any) -> Observation:
    base: dict[str, Any] = {"workers": 4, "settled": True, "elapsed": 2.0, "completed": 80,
                            "sent": 0, "handler_time": 0.1, "ready": 1000, "in_flight": 4,
                            "slo": (10.0,)}
    return Observation(**{**base, **changes})


def test_rule_24_handler_time_well_above_its_minimum_steps_back() -> None:
    limits = Limits(1, 10)
    state = State(min_handler=0.1)
    d = decide(state, window(workers=6, completed=84, handler_time=0.25), limits)
    assert (d.workers, d.action, d.ceiling) == (5, "shrink", 5)
    assert "2.5x its minimum" in d.reason
    calm = decide(state, window(workers=6, completed=120, handler_time=0.15), limits)
    assert calm.workers == 7  # 1.5x is within the factor: the backlog still grows it


def test_rule_24_the_handler_time_minimum_is_measured_anew_after_a_while() -> None:
    limits = Limits(1, 10, reprobe_after=2)
    state = State(min_handler=0.1)
    slower = window(workers=1, completed=8, handler_time=0.25, ready=0, in_flight=1)
    for _ in range(3):
        d = decide(state, slower, limits)
        state = d.state
    assert state.min_handler == 0.25  # the work itself got slower: a new minimum
    more = decide(state, window(workers=3, completed=24, handler_time=0.3), limits)
    assert more.action == "grow"  # 1.2x the new minimum is no saturation


def test_rule_24_a_probe_that_rose_beyond_noise_is_kept_and_the_next_begins() -> None:
    limits = Limits(1, 10)
    probing = decide(State(), window(workers=4, completed=80), limits)
    assert probing.workers == 5 and probing.state.probe_from == 4
    kept = decide(probing.state, window(workers=5, completed=100), limits)
    assert kept.workers == 6 and kept.reason.startswith("probe kept")
    flat = decide(probing.state, window(workers=5, completed=84), limits)
    assert (flat.workers, flat.ceiling) == (4, 4)


def test_rule_24_the_saturation_point_is_probed_again_after_a_while() -> None:
    limits = Limits(1, 10, reprobe_after=3)
    state = State(ceiling=4)
    held = [decide(state, window(), limits)]
    for _ in range(3):
        held.append(decide(held[-1].state, window(), limits))
    assert [d.workers for d in held] == [4, 4, 4, 5]
    assert held[-1].ceiling == 4  # still the known point while the probe runs
    beaten = decide(held[-1].state, window(workers=5, completed=100), limits)
    assert beaten.ceiling is None and beaten.workers == 6  # the downstream grew


def test_rule_24_nothing_is_measured_while_workers_start_and_bounds_come_first() -> None:
    limits = Limits(2, 5)
    assert decide(State(), window(settled=False), limits).action == "hold"
    assert decide(State(), window(workers=0, settled=False), limits).workers == 2
    assert decide(State(), window(workers=7), limits).workers == 5
    zero = Limits(0, 3)
    assert decide(State(), window(workers=0, completed=0, handler_time=None), zero).workers == 1
    assert decide(State(), window(workers=0, completed=0, ready=0, in_flight=0,
                                  handler_time=None), zero).workers == 0


def test_rule_24_a_paused_queue_holds_the_pool() -> None:
    d = decide(State(), window(workers=2, completed=0, paused=True), Limits(1, 10))
    assert (d.workers, d.action, d.reason) == (2, "hold", "queue paused")


def test_rule_24_a_probe_with_too_few_completions_to_tell_is_kept() -> None:
    limits = Limits(1, 10)
    probing = decide(State(), window(workers=1, completed=2, handler_time=5.0), limits)
    kept = decide(probing.state, window(workers=2, completed=3, handler_time=5.0), limits)
    assert kept.workers >= 2 and "too few completions" in kept.reason


@pytest.mark.parametrize("bad", [{"minimum": -1, "maximum": 2}, {"minimum": 3, "maximum": 2},
                                 {"minimum": 0, "maximum": 0},
                                 {"minimum": 1, "maximum": 2, "concurrency": 0},
                                 {"minimum": 1, "maximum": 2, "latency_factor": 1.0},
                                 {"minimum": True, "maximum": 2}])
def test_bad_limits_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgument):
        Limits(**bad)


# -- recorded runs ---------------------------------------------------------------------
# Real runs of `hailq autoscale --trace FILE` (sleep-bound handlers of 0.1 s on SQLite,
# 2 s windows; see tests/policy/recorded/README.md): every window the loop measured and
# the decision it made. Replayed through the policy, the same decisions come out, and
# the runs show what rule 24 asks.

RECORDED = Path(__file__).parent / "recorded"


def recorded(name: str) -> tuple[Limits, list[Observation], list[dict[str, Any]]]:
    lines = [json.loads(line) for line in (RECORDED / f"{name}.jsonl").read_text().splitlines()]
    limits = Limits(**lines[0]["limits"])
    observations = [Observation(**{**line["observation"],
                                   "slo": tuple(line["observation"]["slo"])})
                    for line in lines]
    return limits, observations, [line["decision"] for line in lines]


@pytest.mark.parametrize("name", ["saturated_downstream", "rate_limited", "growth_then_empty"])
def test_rule_24_a_recorded_run_replays_to_the_same_decisions(name: str) -> None:
    limits, observations, made = recorded(name)
    state = State()
    for obs, then in zip(observations, made, strict=True):
        d = decide(state, obs, limits)
        assert (d.workers, d.action, d.reason) == (then["workers"], then["action"],
                                                   then["reason"])
        state = d.state


def test_rule_24_recorded_a_downstream_of_four_holds_the_pool_at_four() -> None:
    _, observations, made = recorded("saturated_downstream")
    sizes = [d["workers"] for d in made]
    assert max(sizes) == 5 and max(o.workers for o in observations) <= 5  # --max is 8
    assert any(d["reason"].startswith("saturated at 4") for d in made)
    assert sizes[-1] == 4


def test_rule_24_recorded_a_rate_limited_queue_stops_at_what_the_limit_keeps_busy() -> None:
    _, observations, made = recorded("rate_limited")
    # 25/s x 0.1 s = 2.5 processes busy at the limit: 3 at most, no saturation point
    assert max(d["workers"] for d in made) <= 3
    assert not any("saturated" in d["reason"] for d in made)
    assert any("rate-limited" in d["reason"] for d in made)
    assert observations[-1].ready > 0  # the backlog was still there


def test_rule_24_recorded_a_backlog_grows_the_pool_and_the_empty_queue_shrinks_it() -> None:
    _, _, made = recorded("growth_then_empty")
    sizes = [d["workers"] for d in made]
    assert max(sizes) == 4 and sizes[-1] == 1
    top = sizes.index(4)
    assert sizes[:top + 1] == sorted(sizes[:top + 1])  # grew without stepping back
    assert any("queue empty" in d["reason"] for d in made[top:])


# A queue in deadline order (rule 41): the target is the figures' smallest pool that meets
# every target (Observation.target), not the backlog's figure; a saturation point still
# stops growth below it.

def run_deadline(target: int, reason: str | None, curve: Any, ticks: int = 40,
                 maximum: int = 20) -> list[Decision]:
    """Ticks of 5 s at 0.5 s handlers; ``curve(n)`` is completions a second at n workers.
    A backlog the backlog's own figure would serve with one worker (its target is 600 s)."""
    limits = Limits(1, maximum)
    n, state, changed, made = 1, State(), False, []
    for _ in range(ticks):
        obs = Observation(workers=n, settled=not changed, elapsed=5.0,
                          completed=round(curve(n) * 5.0), sent=0, handler_time=0.5,
                          ready=50, in_flight=n, slo=(600.0,), target=target,
                          target_reason=reason)
        d = decide(state, obs, limits)
        made.append(d)
        changed, n, state = d.workers != n, d.workers, d.state
    return made


def test_rule_41_autoscale_grows_to_the_smallest_pool_that_meets_every_target() -> None:
    made = run_deadline(6, None, lambda n: 10.0 * n)  # linear: every probe pays
    run = sizes(made)
    assert all(b - a in (0, 1) for a, b in itertools.pairwise(run))
    assert run[-1] == 6 and max(run) == 6  # the target, not --max 20 nor the backlog's 1
    assert all(d.desired == 6 for d in made)
    assert "6 meet every deadline target" in made[0].reason
    assert made[-1].action == "hold" and "6 meet every deadline target" in made[-1].reason


def test_rule_41_autoscale_still_stops_at_a_saturated_downstream_below_the_target() -> None:
    made = run_deadline(8, None, lambda n: 10.0 * min(n, 3))  # flat past 3
    run = sizes(made)
    assert max(run) == 4 and run[-1] == 3  # probed one above the point, no further
    assert any(d.reason.startswith("saturated at 3") for d in made)
    held = [d for d in made if d.workers == 3 and d.action == "hold"]
    assert held and "8 meet every deadline target (backlog 50), at the saturation point 3" \
        in held[-1].reason
    assert held[-1].desired == 3 and held[-1].ceiling == 3  # capped at the point


def test_rule_41_where_no_pool_meets_the_targets_autoscale_grows_to_the_largest_useful(
        ) -> None:
    made = run_deadline(5, "late: 2 ready message(s) already past their deadline",
                        lambda n: 10.0 * n)
    assert sizes(made)[-1] == 5
    assert "no pool meets every deadline target (late: 2 ready message(s)" in \
        made[0].reason and "the largest useful is 5" in made[0].reason
    # Fewer asked later: it scales in to the new target after the calm ticks.
    limits = Limits(1, 20)
    obs = Observation(workers=5, settled=True, elapsed=5.0, completed=50, sent=0,
                      handler_time=0.5, ready=10, in_flight=5, slo=(600.0,), target=2)
    first = decide(made[-1].state, obs, limits)
    second = decide(first.state, obs, limits)
    assert (first.action, second.action, second.workers) == ("hold", "shrink", 2)
    assert "2 meet every deadline target" in second.reason
