"""Rule 41: ``desired_workers`` of a queue in deadline order, the pure part
(``hailq.policy.scaling.deadline_workers`` over ``policy/pool.py``)."""

from __future__ import annotations

from hailq.policy.scaling import Backlog, Demand, deadline_workers, desired_workers

SLO = {9: 10.0, 5: 60.0, 0: 3600.0}


def demand(**changes: object) -> Demand:
    base = {"ready": 0, "in_flight": 0, "oldest_ready_age": None, "arrival_rate": None,
            "handler_time": 1.0}
    return Demand(**{**base, **changes})  # type: ignore[arg-type]


def test_a_backlog_in_deadline_order_needs_only_what_its_deadlines_ask() -> None:
    # 100 normal messages of 1 s, due within 60 s: 2 slots start the last at 49 s.
    first = [(5, 0.0, None)] * 100
    answer = deadline_workers(demand(ready=100), Backlog(0.0, SLO, first, {}))
    assert (answer.workers, answer.met, answer.reason) == (2, True, None)
    # Priority order drains the same backlog within the tightest target (10 s): 10.
    assert desired_workers(demand(ready=100, slo=tuple(SLO.values()))) == 10


def test_processes_of_several_slots_and_a_saturation_point() -> None:
    first = [(9, 0.0, None)] * 40  # 40 urgent messages of 1 s within 10 s: 4 slots
    assert deadline_workers(demand(ready=40), Backlog(0.0, SLO, first, {})).slots == 4
    assert deadline_workers(demand(ready=40, concurrency=3),
                            Backlog(0.0, SLO, first, {})).workers == 2
    assert deadline_workers(demand(ready=40, ceiling=1),
                            Backlog(0.0, SLO, first, {})).workers == 1


def test_messages_past_the_read_ones_count_as_due_with_the_last_read() -> None:
    first = [(5, 0.0, None)] * 10
    small = deadline_workers(demand(ready=10), Backlog(0.0, SLO, first, {}))
    large = deadline_workers(demand(ready=200), Backlog(0.0, SLO, first, {}))
    assert (small.workers, large.workers) == (1, 4)  # 200 s of work started within 60 s


def test_arrivals_keep_their_slots_busy() -> None:
    # 20 urgent a second of 1 s each: at least 20 slots, whatever the backlog.
    answer = deadline_workers(demand(), Backlog(0.0, SLO, [], {9: 20.0}))
    assert answer.met and answer.workers >= 20


def test_a_late_message_names_the_largest_useful_pool_and_why() -> None:
    first = [(9, -100.0, None)] + [(5, 0.0, None)] * 100
    answer = deadline_workers(demand(ready=101), Backlog(0.0, SLO, first, {}))
    assert not answer.met
    assert answer.reason is not None and answer.reason.startswith("late: 1 ")
    assert answer.workers >= 2


def test_max_in_flight_below_what_the_targets_need_says_so() -> None:
    first = [(9, 0.0, None)] * 40
    answer = deadline_workers(demand(ready=40, max_in_flight=2), Backlog(0.0, SLO, first, {}))
    assert not answer.met and answer.reason is not None
    assert answer.reason.startswith("max_in_flight")
    assert answer.workers == 2


def test_a_key_chain_longer_than_its_deadline_allows() -> None:
    first = [(9, 0.0, "k")] * 20  # one at a time: the 12th starts after 11 s > 10 s
    answer = deadline_workers(demand(ready=20), Backlog(0.0, SLO, first, {}))
    assert not answer.met and answer.reason is not None
    assert answer.reason.startswith("key chain") and answer.workers == 1


def test_before_a_handler_time_is_measured_the_old_figure_holds() -> None:
    d = demand(ready=5, handler_time=None)
    assert deadline_workers(d, Backlog(0.0, SLO, [(5, 0.0, None)] * 5, {})).workers == 1


