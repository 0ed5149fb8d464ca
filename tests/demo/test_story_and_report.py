"""The demo's arithmetic, without a database: claims, percentiles, the ideal, the invariants."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from rich.console import Console

from hailq.demo.report import Report, Waits, in_order, percentile, ratio
from hailq.demo.story import VIP_PRIORITY, Plan, ideal_makespan, make_claims


def test_the_default_plan_is_the_seed_in_scaled_time() -> None:
    plan = Plan()
    assert (plan.claims, plan.checkers) == (20_000, 50)
    assert plan.check_seconds == pytest.approx(0.03)
    assert plan.lease == pytest.approx(3.0)
    assert ideal_makespan(plan.claims * plan.check_seconds, plan.checkers) == pytest.approx(12)


def test_two_of_the_checkers_are_the_odd_ones_and_the_rest_are_worker_slots() -> None:
    assert Plan().worker_slots == 48  # + the checker that crashes + the slow one = 50
    assert Plan(checkers=3).worker_slots == 1
    with pytest.raises(ValueError, match="at least 3 checkers"):
        Plan(checkers=2)


def test_claims_average_the_nominal_check_time_so_the_ideal_is_exact() -> None:
    plan = Plan(claims=5000, scale=100)
    claims = make_claims(plan)
    total = sum(c.check_seconds for c in claims)
    assert total / len(claims) == pytest.approx(plan.check_seconds)
    assert ideal_makespan(total, 50) == pytest.approx(5000 * 0.03 / 50)
    assert max(c.check_seconds for c in claims) > 3 * plan.check_seconds  # many photos


def test_claims_have_vips_contracts_of_three_and_one_corrupt_claim() -> None:
    plan = Plan(claims=20_000)
    claims = make_claims(plan)
    assert sum(c.vip for c in claims) == 500
    assert {c.priority for c in claims if c.vip} == {VIP_PRIORITY}
    contracts: dict[str, int] = {}
    for c in claims:
        if c.contract:
            contracts[c.contract] = contracts.get(c.contract, 0) + 1
    assert len(contracts) == plan.contracts and set(contracts.values()) == {3}
    [corrupt] = [c for c in claims if c.corrupt]
    assert claims.index(corrupt) < len(claims) // 10  # early: it dies while others flow
    assert len({c.number for c in claims}) == len(claims)


def test_the_same_plan_gives_the_same_claims() -> None:
    assert make_claims(Plan(claims=300)) == make_claims(Plan(claims=300))
    assert make_claims(Plan(claims=300)) != make_claims(Plan(claims=300, seed=1))


def test_plan_survives_the_trip_to_a_helper_process() -> None:
    plan = Plan(claims=1234, checkers=7, scale=250.5, seed=3)
    assert Plan.from_args(plan.to_args()) == plan


def test_percentile_by_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50
    assert percentile(values, 99) == 99
    assert percentile(values, 100) == 100
    assert percentile(values, 0) == 1
    assert percentile([7.0], 99) == 7
    assert percentile([3.0, 1.0, 2.0], 50) == 2  # unsorted input
    assert percentile([], 50) is None
    with pytest.raises(ValueError):
        percentile(values, 101)


def test_ratio_and_ideal() -> None:
    assert ratio(15.0, 12.0) == pytest.approx(1.25)
    assert math.isinf(ratio(1.0, 0.0))
    assert ideal_makespan(600.0, 50) == 12.0
    with pytest.raises(ValueError):
        ideal_makespan(1.0, 0)


def test_contract_order_means_finish_times_rise_with_claim_numbers() -> None:
    assert in_order([(3, 3.0), (1, 1.0), (2, 2.0)])
    assert not in_order([(1, 1.0), (2, 3.0), (3, 2.0)])
    assert in_order([])


def good_report() -> Report:
    waits = Waits.of([0.1, 0.2])
    return Report(
        backend="sqlite", claims=2000, checkers=20, scale=200.0, check_seconds=0.015,
        lease_seconds=1.5, makespan=1.8, ideal=1.5, send_seconds=0.2, results=1999, lost=0,
        duplicates=0, skipped_by_inbox=1, partial_left=0, dead=1, dead_claim_is_corrupt=True,
        redeliveries=6, crashed_claim=100587, crashed_claim_redelivered=True,
        late_acks_rejected=1, late_acks_accepted=0, statistics_count=2000, contracts=2,
        contracts_in_order=2, vip_wait=waits, normal_wait=waits)


def test_a_good_run_holds_every_invariant_and_reports_its_ratio() -> None:
    report = good_report()
    assert report.ok
    data = report.to_json()
    assert data["ratio"] == pytest.approx(1.2)
    assert data["within_target"] is True
    assert data["throughput"] == pytest.approx(1999 / 1.8, abs=0.1)
    assert all(data["invariants"].values())


@pytest.mark.parametrize("change, broken", [
    ({"lost": 1}, "lost_0"),
    ({"duplicates": 2}, "duplicates_0"),
    ({"partial_left": 1}, "no_partial_results"),
    ({"dead": 2}, "dead_1_the_corrupt_claim"),
    ({"dead_claim_is_corrupt": False}, "dead_1_the_corrupt_claim"),
    ({"statistics_count": 1999}, "statistics_count_is_claims"),
    ({"crashed_claim_redelivered": False}, "crashed_claim_redelivered"),
    ({"late_acks_rejected": 0}, "late_ack_rejected"),
    ({"late_acks_rejected": 0, "late_acks_accepted": 1}, "late_ack_rejected"),  # came late
    ({"late_acks_accepted": 1}, "late_ack_rejected"),
    ({"contracts_in_order": 1}, "contracts_in_order"),
])
def test_each_broken_promise_fails_the_run(change: dict[str, object], broken: str) -> None:
    report = replace(good_report(), **change)  # type: ignore[arg-type]
    assert not report.ok
    assert [name for name, held in report.invariants.items() if not held] == [broken]


def test_a_slow_run_still_passes_but_says_it_missed_the_target() -> None:
    report = replace(good_report(), makespan=3.0)
    assert report.ok
    assert report.to_json()["within_target"] is False


def _rendered(report: Report) -> str:
    console = Console(record=True, width=200)
    report.render(console)
    return console.export_text()


def test_the_report_says_which_lines_are_promises_and_which_are_figures() -> None:
    slow = _rendered(replace(good_report(), makespan=3.0))
    assert "promises (a broken one fails the demo: exit 1)" in slow
    assert "they never fail the demo" in slow
    assert "above the target" in slow and "not a broken promise" in slow
    assert "✗" not in slow  # a missed figure is never marked as a failure
    assert "every promise held (exit 0)" in slow
    broken = _rendered(replace(good_report(), lost=1))
    assert "✗" in broken and "a promise was broken (exit 1)" in broken
