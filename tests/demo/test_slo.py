"""``hailq demo --slo`` (rule 41): the service-level scenario simulated and live in scaled
time. The pure parts are tested without a database; the demo runs end to end, fast
(time 400 times faster and the pool named again once: the live figures are then
dominated by the pool's own cost, so only the report's shape is asserted), on each
backend; the published scale is slow."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hailq.demo.slo import SloReport, SloRow, desired_for, table
from hailq.demo.slo_live import LiveRun, _classes, _service
from hailq.policy.simulation import (
    SCENARIO_HANDLER,
    SLO_SCENARIO,
    Job,
    Order,
    scenario,
    simulate,
)

from .test_demo_run import hailq_cli


def test_the_service_time_is_slots_times_the_waiting_time_over_the_messages_begun() -> None:
    # Two slots; from 0 to 10 s a message always waits longer than 1 s; 5 begin then.
    events = [(0.0, 2.0), (0.0, 4.0), (1.0, 6.0), (2.0, 8.0), (3.0, 10.0),
              (20.0, 20.1)]  # a short wait at an idle moment counts for nothing
    assert _service(events, 2, least=1.0) == pytest.approx(2 * 10.0 / 5)
    # A fresh message begun in a waiting span counts (it took a slot), its wait does not.
    assert _service([*events, (5.0, 5.0)], 2, least=1.0) == pytest.approx(2 * 10.0 / 6)
    assert _service([(0.0, 0.5)], 2, least=1.0) is None


def test_live_classes_count_breaches_and_the_nearest_rank_p99() -> None:
    jobs = [Job(0.0, 9, 1.0)] * 100 + [Job(0.0, 0, 1.0)]
    waits: list[float | None] = [float(i) for i in range(100)] + [None]  # p0 not handled
    (nine,) = _classes(jobs, waits, {9: 90.0, 0: 10.0})
    assert (nine.priority, nine.messages, nine.breaches) == (9, 100, 9)
    assert (nine.p99_wait, nine.max_wait) == (98.0, 99.0)


def test_the_pool_desired_workers_names_for_the_scenario_is_the_simulated_smallest() -> None:
    jobs = scenario(1)
    slots = desired_for(jobs, SCENARIO_HANDLER)
    deadline = Order("deadline")
    assert simulate(jobs, slots, deadline, SLO_SCENARIO).breaches == 0
    assert simulate(jobs, slots - 1, deadline, SLO_SCENARIO).breaches > 0
    # A slower service needs more slots.
    assert desired_for(jobs, SCENARIO_HANDLER * 1.05) > slots


def test_the_report_table_has_a_row_per_run_and_both_halves() -> None:
    jobs = [Job(0.0, 9, 1.0), Job(0.0, 5, 1.0), Job(0.0, 0, 1.0)]
    slo = {9: 1.0, 5: 2.0, 0: 3.0}
    sim = simulate(jobs, 1, Order("deadline"), slo)
    live = LiveRun(sim.classes, 1.0, True, 3.0)
    report = SloReport("sqlite", 10.0, 1, 3, slo, 1, 1.0, 1, 1.0, True,
                       [SloRow(Order("deadline"), 1, "desired", sim, None, live)], 3.0)
    head, rule, row = table(report)
    assert head.count("|") == rule.count("|") == row.count("|") == 11
    assert row == "| deadline, 1 | 0 / 0 s | 0 / 1 s | 0 / 2 s | - | - | - | " \
        "0 / 0 s | 0 / 1 s | 0 / 2 s |"
    assert "simulated, 1.00 s: p9" in head
    assert report.to_json()["rows"][0]["live"][0]["priority"] == 9


def check_shape(report: dict[str, Any]) -> None:
    assert report["complete"] is True
    assert report["messages"] == sum(c["messages"] for c in report["rows"][0]["simulated"])
    needed = report["desired_workers_live"]
    assert report["desired_workers_live"] >= report["desired_workers_simulated"]
    kinds = {(r["order"], r["slots"]) for r in report["rows"]}
    assert {("strict", needed), ("aging", needed), ("deadline", needed),
            ("deadline", needed - 1)} <= kinds
    for row in report["rows"]:
        assert row["live_complete"] is True
        for half in ("simulated", "live"):
            assert [c["priority"] for c in row[half]] == [9, 5, 0]
            for c in row[half]:
                assert c["breaches"] >= 0 and c["p99_wait"] <= c["max_wait"]
    assert set(report["shows"]) == {"deadline_meets_every_target", "strict_breaches",
                                    "best_aging_breaches", "one_fewer_breaches"}


@pytest.mark.slow  # a long scenario: .ci/run runs it after make test
def test_the_slo_demo_runs_fast_and_reports_the_table_s_shape(url: str) -> None:
    done = hailq_cli("demo", "--slo", "--scale", "400", "--steps", "1", "--json", "--url",
                     url, timeout=280)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["scale"] == 400 and report["seed"] == 1
    check_shape(report)


@pytest.mark.slow
def test_the_published_slo_command_at_its_scale_on_sqlite() -> None:
    """The docs' command, at its scale (6 to 10 minutes). The pool is named again until
    deadline order meets every target live there, and strict priority breaches by
    hundreds there; whether aging and one slot fewer breach is a figure of the machine's
    load (docs/concepts/priorities.md shows runs where each did and did not)."""
    done = hailq_cli("demo", "--slo", "--json", timeout=1500)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    check_shape(report)
    assert report["shows"]["deadline_meets_every_target"], report
    assert report["shows"]["strict_breaches"], report
