"""Fixtures of the conformance suite, on top of ``tests/conftest.py``'s ``broker`` and ``url``."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import cast

import pytest

import hailq
import hailq.aio
from aio_bridge import LoopThread, Synced

from .helpers import SKEWS, RawDatabase


@pytest.fixture
def raw(backend_name: str, url: str) -> RawDatabase:
    """The broker's database opened with the plain driver (sqlite3 or psycopg)."""
    return RawDatabase(backend_name, url)


# Scenarios that reach past the API (a worker, a scheduler, the backend, a fork); they run
# on the sync API only.
SYNC_ONLY = {
    "test_rule_03_publish_joins_the_callers_transaction": "the caller's sqlite3 "
    "connection belongs to the test's thread, hailq.aio's joins it on the loop's",
    "test_rule_03_rolled_back_transaction_leaves_no_message": "as above",
    "test_rule_03_committed_transaction_makes_the_message_receivable": "as above",
    "test_rule_41_a_scheduled_message_is_due": "runs a scheduler on the broker",
    "test_rule_41_desired_workers_is_the_smallest_pool": "reads the backend",
    "test_rule_41_a_late_message_names_the_largest_useful_pool": "reads the backend",
    "test_rule_41_the_doctor_names": "the doctor reads the backend",
    "test_rule_41_the_fused_ack_and_claim": "reads the backend",
    "test_rule_41_sends_record_each_priority": "reads the backend",
    "test_rule_40_without_retain_no_history_rows": "spies on the backend's statements",
    "test_rule_40_acked_and_dead_are_recorded_with": "names the consumer on the sync queue",
    "test_rule_40_prune_after_the_retention": "prunes through the backend",
    "test_rule_40_history_is_found_before_and_after": "settles through the backend",
    "test_rule_41_sends_per_priority_are_kept": "prunes through the backend",
    "test_rule_32_a_pause_reaches_a_running_worker": "runs a worker on the broker",
    "test_rule_32_a_pause_survives_the_workers_restart": "runs a worker on the broker",
    "test_rule_35_scheduler_processes": "runs schedulers on the broker",
    "test_rule_35_new_schedules_downtime": "runs a scheduler on the broker",
    "test_rule_28_a_forked_child": "an async broker is not carried across fork",
    "test_rule_18_": "runs a worker on the broker (async handlers: tests/aio/test_aio_worker.py)",
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """No hailq.aio variant of a SYNC_ONLY scenario: it is deselected (and counted so),
    never collected and skipped."""
    def sync_only(item: pytest.Item) -> bool:
        callspec = getattr(item, "callspec", None)
        name = getattr(item, "originalname", item.name)
        return callspec is not None and callspec.params.get("api") == "aio" and \
            name.startswith(tuple(SYNC_ONLY))

    dropped = [item for item in items if sync_only(item)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if not sync_only(item)]


# The asyncio run of every scenario is marked slow: .ci/run runs it after make test,
# which keeps to its time with the sync run (tests/aio covers hailq.aio in make test).
@pytest.fixture(params=["sync", pytest.param("aio", marks=pytest.mark.slow)])
def api(request: pytest.FixtureRequest) -> str:
    """Which API the scenario runs through: the sync one, or ``hailq.aio`` behind a sync
    face (``aio_bridge.Synced``), rule 37."""
    return str(request.param)


@pytest.fixture
def broker(url: str, backend_name: str, api: str) -> Iterator[hailq.Broker]:
    """The suite's broker. On SQLite its clock is injected (real time plus a skew that
    ``helpers.advance`` moves on), so a test lets a lease end without waiting for it."""
    skew = [0.0]
    clock = None if backend_name != "sqlite" else (lambda: time.time() + skew[0])
    if api == "aio":
        loop = LoopThread()
        b = cast(hailq.Broker, Synced(loop.run(hailq.aio.connect(url, clock=clock)), loop))
    else:
        b = hailq.connect(url, clock=clock)
    if clock is not None:
        SKEWS[id(b)] = skew
    try:
        yield b
    finally:
        SKEWS.pop(id(b), None)
        b.close()
        if api == "aio":
            loop.stop()
