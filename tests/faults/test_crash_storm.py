"""The crash storm (SPEC rules 7, 8, 12, 13, 21, 23): workers SIGKILLed every 0.5 s lose nothing.

Real ``hailq worker`` processes consume numbered messages; every handler writes
its effect through the inbox. A random worker is SIGKILLed every 0.5 s and a
new one started in its place until the queue is empty. Then the ledger must
show every message's effect exactly once, nothing stuck, nothing dead, and a
SQLite file that passes ``PRAGMA integrity_check``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import hailq

from .conftest import Figure
from .ledger import EffectStore, Ledger, check_queue, sqlite_integrity
from .workers import crash_storm, fleet, send_numbered

# A long scenario with servers of its own: CI runs it after make test (.ci/run's fault
# stage), make test-faults always.
pytestmark = pytest.mark.slow

LEASE = 2.0
MAX_ATTEMPTS = 10


def run_storm(url: str, effects: EffectStore, tmp_path: Path, figure: Figure, *,
              messages: int, processes: int, timeout: float) -> None:
    ledger = Ledger()
    with hailq.connect(url) as broker:
        q = broker.queue("storm", lease=LEASE, max_attempts=MAX_ATTEMPTS,
                         retry={"base": 0.05, "max": 1.0, "jitter": 0})
        send_numbered(q, ledger, 0, messages, work=0.002)
        assert q.stats().ready == messages
        with fleet(url, "storm", effects, tmp_path, processes=processes,
                   concurrency=4) as f:
            result = crash_storm(q, f, kill_every=0.5, timeout=timeout, seed=messages)
            codes = f.stop()
            tail = f.log_tail()
        report = check_queue(ledger, effects, q)
        stats = q.stats()
        figure(backend=url.split(":")[0], messages=messages, processes=processes,
               seconds=round(result.seconds, 1), kills=result.kills,
               redelivered=stats.redelivered, late_acks=stats.late_acks,
               **report.summary())
        assert result.drained, f"not drained after {timeout} s: {result.progress[-5:]}\n{tail}"
        assert result.kills >= min(10, int(result.seconds / 0.5) - 2), result
        assert report.ok, f"{report}\n{tail}"
        assert len(report.lost) == 0 and not report.duplicated
        assert stats.dead == 0 and q.dead_letters(limit=10) == []
        assert effects.count() == messages
        # Killing workers really did interrupt work: some messages came back.
        assert stats.redelivered > 0
        # 0: drained on SIGTERM; -15: SIGTERM came while a fresh worker was still importing.
        assert all(c in (0, -15) for c in codes), (codes, tail)
    if url.startswith("sqlite:"):
        assert sqlite_integrity(url[len("sqlite:///"):].split("?")[0]) == "ok"
        assert sqlite_integrity(effects.url[len("sqlite:///"):]) == "ok"


def test_crash_storm_3000_messages_4_workers_lose_nothing_and_duplicate_no_effect(
        url: str, effects: EffectStore, tmp_path: Path, figure: Figure) -> None:
    run_storm(url, effects, tmp_path, figure, messages=3000, processes=4, timeout=120)


@pytest.mark.slow
def test_crash_storm_20000_messages_8_workers_lose_nothing_and_duplicate_no_effect(
        url: str, effects: EffectStore, tmp_path: Path, figure: Figure) -> None:
    run_storm(url, effects, tmp_path, figure, messages=20_000, processes=8, timeout=900)
