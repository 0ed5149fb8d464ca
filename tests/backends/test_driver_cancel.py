"""Cancel by id (rule 40) at the seam, on every backend: what each step writes, which
receipts it refuses, and the one place a cancelled message leaves."""

from __future__ import annotations

import pytest

from hailq.backends.base import (
    AckParams,
    CancelledParams,
    ExtendParams,
    MessageIdRef,
    MessageRef,
    NackParams,
    QueueRef,
)
from hailq.errors import MessageNotFound, QueueNotFound

from .conftest import LEASE, Store, claim, outlive, receipt, save, send, unchanged


def test_cancel_of_a_running_message_fences_every_receipt_and_keeps_its_lease(
        store: Store) -> None:
    backend = store.backend
    save(backend, "q", lease=30)
    [mid] = send(backend, "q", 1)
    [row] = claim(backend, "q")
    lease = receipt("q", row)
    assert backend.message_cancel(MessageRef("q", mid)) == "running"
    with unchanged(store):  # again: nothing more
        assert backend.message_cancel(MessageRef("q", mid)) == "running"
        assert backend.message_ack(AckParams([lease])) == [None]
        assert backend.message_nack(NackParams(lease, "x")) is False
        assert backend.message_extend(ExtendParams([lease], 60)) == [None]
        assert backend.message_cancelled(CancelledParams("q", [lease])) == [mid]
        assert backend.message_cancelled(CancelledParams("q", [lease._replace(
            token="0" * 16)])) == []  # another lease of it: not this one's to settle
        assert backend.queue_stats(QueueRef("q")).in_flight == 1
    shown = backend.message_get(MessageRef("q", mid))
    assert shown is not None and shown.state == "cancelled"
    assert backend.message_cancel_settle(CancelledParams("q", [lease])) == [mid]
    assert backend.message_get(MessageRef("q", mid)) is None
    assert backend.message_cancel_settle(CancelledParams("q", [lease])) == []
    stats = backend.queue_stats(QueueRef("q"))
    assert (stats.in_flight, stats.acked, stats.late_acks) == (0, 0, 0)


def test_an_ended_lease_of_a_cancelled_message_removes_it_at_upkeep(store: Store) -> None:
    backend = store.backend
    save(backend, "q", lease=LEASE, max_attempts=1)
    [mid] = send(backend, "q", 1, ordering_key="k")
    [nxt] = send(backend, "q", 2, ordering_key="k")
    [row] = claim(backend, "q")
    backend.message_cancel(MessageRef("q", mid))
    outlive()
    [again] = claim(backend, "q", lease=30)  # upkeep: never dead, the key's next is free
    assert again.id == nxt
    stats = backend.queue_stats(QueueRef("q"))
    assert (stats.dead, stats.dead_lettered, stats.parked_keys) == (0, 0, [])
    assert backend.message_cancelled(CancelledParams("q", [receipt("q", row)])) == []


def test_cancel_of_nothing_live_writes_nothing(store: Store) -> None:
    backend = store.backend
    save(backend, "q", lease=30, max_attempts=1)
    [acked, dead] = send(backend, "q", 1, 2)
    first, second = claim(backend, "q", 2)
    backend.message_ack(AckParams([receipt("q", first)]))
    backend.message_nack(NackParams(receipt("q", second), "boom", "dead"))
    with unchanged(store):
        for gone in (acked, dead):
            with pytest.raises(MessageNotFound):
                backend.message_cancel(MessageRef("q", gone))
        with pytest.raises(QueueNotFound):
            backend.message_cancel(MessageRef("nowhere", acked))
    assert backend.message_locate(MessageIdRef(dead)) is None
    assert backend.message_locate(MessageIdRef(acked)) is None
