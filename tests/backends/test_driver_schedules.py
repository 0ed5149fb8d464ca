"""The seam's schedules and rate buckets on every backend (SPEC rules 33 and 35)."""

from __future__ import annotations

import threading
import time

from hailq.backends.base import (
    Backend,
    ClaimParams,
    ScheduleDeclareParams,
    ScheduleDeleteParams,
    ScheduleFireParams,
    SchedulePauseParams,
    ScheduleSaveParams,
    WaitParams,
)
from hailq.codec import encode_body
from waiting import wait_for

from .conftest import Store, claim, message, save, send

# -- schedules (rule 35) ------------------------------------------------------------------------


def definition(name: str = "nightly", *, every: float | None = 60.0, now: float = 1000.0,
               body: object = "report", source: str = "broker") -> ScheduleSaveParams:
    data, kind = encode_body(body, 1 << 20)
    return ScheduleSaveParams(name=name, queue="reports", cron=None, every=every,
                              timezone="UTC", catch_up=0, body=data, body_kind=kind,
                              headers=None, priority=3, source=source, now=now)


def fire(backend: Backend, seen: float, slot: float, n: int = 1,
         name: str = "nightly") -> bool:
    return backend.schedule_fire(ScheduleFireParams(
        name, seen, slot, slot, [message("reports", f"slot {slot}") for _ in range(n)]))


def test_a_new_schedule_starts_with_its_creation_as_its_last_slot(backend: Backend) -> None:
    backend.schedule_save(definition(now=1000.0))
    [row] = backend.schedule_list()
    assert (row.name, row.queue, row.every, row.priority, row.source) == (
        "nightly", "reports", 60.0, 3, "broker")
    assert row.last_slot == row.created_at == row.declared_at == 1000.0
    assert (row.paused, row.fired, row.fired_at) == (False, 0, None)


def test_saving_again_changes_the_definition_and_keeps_last_slot_pause_and_counts(
        backend: Backend) -> None:
    backend.schedule_save(definition(now=1000.0))
    assert fire(backend, 1000.0, 1020.0)
    backend.schedule_pause(SchedulePauseParams("nightly", True, 1030.0))
    backend.schedule_save(definition(every=120.0, now=2000.0, body="other", source="app"))
    [row] = backend.schedule_list()
    assert (row.every, row.source, row.last_slot, row.paused, row.fired) == (
        120.0, "app", 1020.0, True, 1)
    assert row.created_at == 1000.0 and row.declared_at == 2000.0


def test_a_slot_is_fired_once_from_the_last_slot_seen_with_its_messages(
        store: Store) -> None:
    backend = store.backend
    save(backend, "reports")
    backend.schedule_save(definition(now=1000.0))

    assert fire(backend, 1000.0, 1060.0, n=2)
    assert not fire(backend, 1000.0, 1060.0)  # another scheduler saw the same last slot
    assert not fire(backend, 1000.0, 1120.0)  # ... or an older one: nothing again
    assert not fire(backend, 1060.0, 1060.0)  # not a later slot
    [row] = backend.schedule_list()
    assert (row.last_slot, row.fired, row.fired_at) == (1060.0, 2, 1060.0)
    assert len(claim(backend, "reports", 10)) == 2


def test_racing_schedulers_on_their_own_connections_fire_a_slot_once(store: Store) -> None:
    save(store.backend, "reports")
    store.backend.schedule_save(definition(now=1000.0))
    backends = [store.open() for _ in range(6)]
    won: list[bool] = []
    start = threading.Barrier(len(backends))

    def race(b: Backend) -> None:
        start.wait()
        won.append(fire(b, 1000.0, 1060.0))

    threads = [threading.Thread(target=race, args=(b,)) for b in backends]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(won) == [False] * 5 + [True]
    assert len(claim(store.backend, "reports", 10)) == 1


def test_a_paused_or_removed_schedule_fires_nothing_and_resume_skips_the_pause(
        backend: Backend) -> None:
    save(backend, "reports")
    backend.schedule_save(definition(now=1000.0))
    assert backend.schedule_pause(SchedulePauseParams("nightly", True, 1010.0))
    assert not fire(backend, 1000.0, 1060.0)
    assert backend.schedule_pause(SchedulePauseParams("nightly", False, 5000.0))
    [row] = backend.schedule_list()
    assert (row.paused, row.last_slot) == (False, 5000.0)

    assert backend.schedule_delete(ScheduleDeleteParams("nightly"))
    assert not fire(backend, 5000.0, 5040.0)
    assert backend.schedule_list() == []
    assert not backend.schedule_delete(ScheduleDeleteParams("nightly"))
    assert not backend.schedule_pause(SchedulePauseParams("nightly", True, 6000.0))
    assert claim(backend, "reports", 10) == []


def test_declaring_moves_declared_at_of_the_named_schedules_only(backend: Backend) -> None:
    backend.schedule_save(definition("a", now=1000.0, source="app"))
    backend.schedule_save(definition("b", now=1000.0, source="app"))
    backend.schedule_declare(ScheduleDeclareParams(["a"], 1500.0))
    backend.schedule_declare(ScheduleDeclareParams([], 1600.0))
    assert {r.name: r.declared_at for r in backend.schedule_list()} == {"a": 1500.0,
                                                                        "b": 1000.0}


# -- rate buckets (rule 33) ---------------------------------------------------------------------


def test_a_limited_claim_takes_whole_tokens_and_gives_back_what_it_found_no_message_for(
        backend: Backend) -> None:
    save(backend, "results", rate="1/h", burst=4)
    send(backend, "results", 1, 2)
    assert len(claim(backend, "results", 10)) == 2  # four tokens taken, two given back
    send(backend, "results", 3, 4, 5)
    assert len(claim(backend, "results", 10)) == 2
    assert claim(backend, "results", 10) == []


def test_a_limit_is_a_live_setting_and_none_removes_it(backend: Backend) -> None:
    save(backend, "results", rate="1/h", burst=1)
    send(backend, "results", *range(10))
    assert len(claim(backend, "results", 10)) == 1
    save(backend, "results")  # the operator removes the limit
    # Within the settings cache (0.5 s) the old limit leases nothing: claim until it is out.
    assert len(wait_for(lambda: claim(backend, "results", 10), 5, "the limit's end")) == 9


def test_a_wait_on_a_queue_out_of_tokens_sleeps_until_its_next_token(
        backend: Backend) -> None:
    save(backend, "results", rate="4/s", burst=1)
    send(backend, "results", *range(5))
    assert len(claim(backend, "results", 5)) == 1
    began = time.monotonic()
    backend.message_wait(WaitParams(["results"], 5.0))
    assert 0.1 < time.monotonic() - began < 1.0  # a token is due after 0.25 s
    assert len(backend.message_claim(ClaimParams("results", 5)).rows) == 1
