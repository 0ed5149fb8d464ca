"""The checker itself: each kind of failure it exists to catch is reported, and only that."""

from __future__ import annotations

from pathlib import Path

import hailq

from .ledger import EffectStore, EffectWriter, Ledger, check, check_queue


def _ledger(n: int) -> Ledger:
    ledger = Ledger()
    ledger.add([f"m{i}" for i in range(n)], range(n))
    return ledger


def test_a_clean_run_is_ok() -> None:
    report = check(_ledger(3), [("m0", 0), ("m1", 1), ("m2", 2)])
    assert report.ok and report.summary()["effects"] == 3


def test_each_failure_is_reported_under_its_own_name() -> None:
    effects = [("m0", 0), ("m0", 0), ("m1", 99), ("x", 7)]
    report = check(_ledger(6), effects, live=["m3"], dead=["m4"])
    assert report.duplicated == {"m0": 2}
    assert sorted(report.unexpected) == ["m1", "x"]  # wrong body, never sent
    assert report.stuck == ["m3"]
    assert report.dead == ["m4"]
    assert report.lost == ["m2", "m5"]
    assert not report.ok
    assert "lost=2" in str(report) and "first duplicated" in str(report)


def test_the_inbox_keeps_a_redelivered_message_to_one_effect(tmp_path: Path) -> None:
    store = EffectStore(f"sqlite:///{tmp_path / 'effects.db'}")
    store.create()
    writer = EffectWriter(store)
    assert writer.apply("m0", 0, 1, 1, 0.0) is True
    assert writer.apply("m0", 0, 2, 1, 0.0) is False  # the redelivery is recognised
    writer.close()
    assert store.rows() == [("m0", 0)]


def test_check_queue_reads_live_and_dead_messages_from_the_queue(sqlite_url: str,
                                                                 tmp_path: Path) -> None:
    store = EffectStore(f"sqlite:///{tmp_path / 'effects.db'}")
    store.create()
    ledger = Ledger()
    with hailq.connect(sqlite_url) as broker:
        q = broker.queue("ledger", max_attempts=1)
        ledger.add(q.send_many([{"n": 0}, {"n": 1}]), [0, 1])
        [m] = q.receive()
        m.nack(delay=0)  # its only attempt: dead
        report = check_queue(ledger, store, q)
    assert report.dead == [m.id] and len(report.stuck) == 1 and not report.lost
