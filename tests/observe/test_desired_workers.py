"""``desired_workers`` (rule 25): a pure function, and PostgreSQL's view that says the same,
with the rate limit (rule 33) and the autoscaler's saturation point (rule 24)."""

from __future__ import annotations

import psycopg
import pytest

import hailq
from hailq.backends.base import FiguresRecordParams, RateAdd
from hailq.internal import ops
from hailq.models import AutoscalerInfo, WorkerInfo
from hailq.policy.scaling import Demand, desired_workers


def demand(**changes: object) -> Demand:
    base = {"ready": 0, "in_flight": 0, "oldest_ready_age": None, "arrival_rate": None,
            "handler_time": None}
    return Demand(**{**base, **changes})  # type: ignore[arg-type]


def test_an_idle_queue_wants_no_worker() -> None:
    assert desired_workers(demand()) == 0
    assert desired_workers(demand(handler_time=0.5, arrival_rate=0.0)) == 0


def test_backlog_without_any_worker_or_measurement_wants_one_so_keda_scales_from_zero() -> None:
    assert desired_workers(demand(ready=1)) == 1
    assert desired_workers(demand(ready=20_000, oldest_ready_age=1.0)) == 1


def test_steady_state_follows_littles_law() -> None:
    # 40 messages/s x 0.5 s each = 20 busy slots; 4 slots per process -> 5 processes
    d = demand(arrival_rate=40.0, handler_time=0.5, concurrency=4, in_flight=20, workers=5)
    assert desired_workers(d) == 5


def test_a_backlog_is_drained_within_the_tightest_service_level() -> None:
    # 20,000 claims of 0.3 s within 600 s: 10 slots; 2 per process -> 5
    d = demand(ready=20_000, handler_time=0.3, concurrency=2, slo=(600.0,),
               oldest_ready_age=5.0)
    assert desired_workers(d) == 5
    tighter = demand(ready=20_000, handler_time=0.3, concurrency=2, slo=(60.0, 600.0),
                     oldest_ready_age=5.0)
    assert desired_workers(tighter) == 50


def test_a_backlog_older_than_every_target_asks_for_one_more_than_run_now() -> None:
    d = demand(ready=3, handler_time=0.01, workers=4, oldest_ready_age=700.0, slo=(600.0,))
    assert desired_workers(d) == 5


def test_never_below_the_slots_in_flight_nor_above_what_max_in_flight_lets_work() -> None:
    assert desired_workers(demand(in_flight=8, handler_time=0.01, concurrency=4)) == 2
    capped = demand(ready=100_000, handler_time=1.0, concurrency=2, max_in_flight=4)
    assert desired_workers(capped) == 2
    assert desired_workers(demand(ready=100_000, handler_time=1.0, ceiling=3)) == 3


def test_rule_33_a_rate_limited_queue_wants_no_more_than_its_limit_keeps_busy() -> None:
    # 10/s x 0.5 s = 5 slots busy at the limit, however large the backlog
    d = demand(ready=100_000, handler_time=0.5, oldest_ready_age=900.0, workers=5,
               rate=10.0)
    assert desired_workers(d) == 5
    assert desired_workers(demand(ready=100_000, handler_time=0.5, concurrency=2,
                                  rate=10.0)) == 3
    assert desired_workers(demand(ready=3, rate=0.001, handler_time=0.01)) == 1  # work: 1


def test_rule_24_a_measured_saturation_point_caps_what_the_backlog_asks() -> None:
    d = demand(ready=100_000, handler_time=1.0, oldest_ready_age=900.0, workers=4)
    assert desired_workers(d) > 4
    assert desired_workers(demand(ready=100_000, handler_time=1.0, oldest_ready_age=900.0,
                                  workers=4, ceiling=4)) == 4


def claims(priority: int, handled: int, seconds: float, failed: int = 0) -> RateAdd:
    """A flush of the queue "claims": ``handled`` claims, ``failed`` of them failed."""
    return RateAdd(queue="claims", priority=priority, started=handled,
                   acked=handled - failed, failed=failed, handler_total=seconds)


SCENARIOS = [
    {},  # nothing measured
    {"rates": [claims(9, 50, 25.0, failed=2)]},
    {"rates": [claims(0, 10, 30.0)], "workers": 2},
    {"rates": [claims(0, 40, 40.0)], "rate": "2/s"},
    {"rates": [claims(0, 40, 40.0)], "ceilings": [2, 1]},
    {"rates": [claims(0, 40, 40.0)], "ceilings": [2, None]},
]


@pytest.mark.postgres
@pytest.mark.parametrize("scenario", range(len(SCENARIOS)))
def test_rule_25_the_postgresql_view_says_what_the_figures_say(pg_url: str,
                                                               scenario: int) -> None:
    given = SCENARIOS[scenario]
    broker = hailq.connect(pg_url)
    try:
        claims = broker.queue("claims", slo={9: 10, 0: 600}, rate=given.get("rate"))
        broker.queue("idle")
        claims.send_many(list(range(25)))
        claims.receive(max_messages=3)
        for n in range(int(given.get("workers", 0))):  # type: ignore[call-overload]
            ops(broker).save_worker(WorkerInfo(f"w{n}", "host", n, ["claims"], 3, 1, 0.0, 0.0,
                                          "running"))
        broker.backend.figures_record(FiguresRecordParams(
            rates=given.get("rates", []), sampled=["claims"]))  # type: ignore[arg-type]
        for n, point in enumerate(given.get("ceilings", [])):  # type: ignore[arg-type]
            ops(broker).record_autoscale(AutoscalerInfo(
                f"h:{n}:claims", "claims", "h", n, 3, 9, "hold", "test", 0.0, point))
        schema = pg_url.rsplit("schema=", 1)[1].split("&")[0]
        with psycopg.connect(pg_url.split("?")[0]) as conn:
            found = dict(conn.execute(
                f"SELECT queue, desired_workers FROM {schema}.desired_workers").fetchall())
        assert found["claims"] == claims.figures().desired_workers
        assert found["idle"] == broker.get_queue("idle").figures().desired_workers == 0
        assert found["claims"] >= 1  # work is ready
        if "rate" in given:  # 2/s x 1 s per message: 2 slots busy at the limit
            assert found["claims"] == 2
        if given.get("ceilings") == [2, 1]:
            assert found["claims"] == 3
    finally:
        broker.close()
