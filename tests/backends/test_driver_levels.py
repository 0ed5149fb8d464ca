"""The seam's queue levels (the dashboard's charts' history, rule 25) on every backend:
one slot counted and written by the first backend that comes, the others counting
nothing; the counts as ``queue_stats`` gives them; the levels' reads write nothing
(rule 30)."""

from __future__ import annotations

from hailq.backends.base import (
    SLOT,
    AckParams,
    Backend,
    LevelsReadParams,
    LevelsRecordParams,
    QueueRef,
)
from waiting import clear_of_slot_end

from .conftest import LEASE, Store, claim, outlive, receipt, save, send, unchanged


def test_levels_count_as_stats_counts_them(backend: Backend) -> None:
    save(backend, "jobs", max_attempts=1)
    send(backend, "jobs", 1, 2, 3, 4)
    send(backend, "jobs", 5, delay=3600)
    done, _held = claim(backend, "jobs", 2, lease=60)
    claim(backend, "jobs", 1, lease=LEASE)
    backend.message_ack(AckParams([receipt("jobs", done)]))
    outlive()  # the lapsed lease was the last attempt: dead, though no one wrote that
    clear_of_slot_end()
    assert backend.levels_record(LevelsRecordParams())
    stats = backend.queue_stats(QueueRef("jobs"))
    [row] = backend.levels_read(LevelsReadParams(backend.clock_now() - 60))
    assert (row.ready, row.in_flight, row.delayed, row.dead) == \
        (stats.ready, stats.in_flight, stats.scheduled, stats.dead) == (1, 1, 1, 1)
    assert (row.sent, row.acked) == (stats.sent, stats.acked) == (5, 1)


def test_the_first_backend_of_a_slot_writes_it_the_others_count_nothing(store: Store) -> None:
    save(store.backend, "jobs")
    send(store.backend, "jobs", "a")
    others = [store.open() for _ in range(3)]
    clear_of_slot_end()
    assert store.backend.levels_record(LevelsRecordParams())
    with unchanged(store):
        assert [b.levels_record(LevelsRecordParams()) for b in others] == [False] * 3
    rows = store.backend.levels_read(LevelsReadParams(store.backend.clock_now() - 60))
    assert [(r.queue, r.ready) for r in rows] == [("jobs", 1)]


def test_levels_reads_write_nothing_and_filter_by_queue_and_time(store: Store) -> None:
    for name in ("alpha", "beta"):
        save(store.backend, name)
        send(store.backend, name, name)
    clear_of_slot_end()
    assert store.backend.levels_record(LevelsRecordParams())
    now = store.backend.clock_now()
    with unchanged(store):
        both = store.backend.levels_read(LevelsReadParams(now - 60))
        alpha = store.backend.levels_read(LevelsReadParams(now - 60, "alpha"))
        later = store.backend.levels_read(LevelsReadParams(now + 2 * SLOT))
    assert [r.queue for r in both] == ["alpha", "beta"]
    assert [r.queue for r in alpha] == ["alpha"]
    assert later == []
