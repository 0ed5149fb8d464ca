"""SPEC rules 13 and 15: a message that kills its worker process goes dead after max_attempts.

The handler calls ``os._exit(1)`` for the poison message, so its handler never
nacks it (attempts are counted at receive). The worker runs with ``--pool
process``: hailq's own supervisor restarts each killed child and fails the
message the child held with the cause ("worker process exited with code 1 while
handling it"), rather than waiting for its lease to end. The poison must end in the
dead-letter queue after ``max_attempts`` with that error for every attempt, and
every other message must take effect exactly once meanwhile.
"""

from __future__ import annotations

import time
from pathlib import Path

import hailq

from .conftest import Figure
from .ledger import EffectStore, Ledger, check_queue
from .workers import WorkerFleet, send_numbered, unfinished

MAX_ATTEMPTS = 3


def test_message_that_kills_its_worker_is_dead_lettered_after_max_attempts_while_others_flow(
        url: str, effects: EffectStore, tmp_path: Path, figure: Figure) -> None:
    ledger = Ledger()
    with hailq.connect(url) as broker:
        q = broker.queue("poison", lease=1, max_attempts=MAX_ATTEMPTS,
                         retry={"base": 0.05, "jitter": 0})
        send_numbered(q, ledger, 1, 100, work=0.005)
        poison_id = q.send({"n": 0, "exit": True})
        send_numbered(q, ledger, 101, 100, work=0.005)
        f = WorkerFleet(url, "poison", effects, tmp_path, processes=1, concurrency=2,
                        grace=5, extra=("--pool", "process"))
        t0 = time.monotonic()
        try:
            deadline = t0 + 90
            while (unfinished(q) or q.stats().dead == 0) and time.monotonic() < deadline:
                assert f.procs[0].poll() is None, f"the supervisor gave up\n{f.log_tail()}"
                time.sleep(0.1)
            seconds = time.monotonic() - t0
            codes = f.stop()
            tail = f.log_tail()
        finally:
            f.kill_all()
        report = check_queue(ledger, effects, q)
        dead = q.dead_letters()
        stats = q.stats()
    figure(backend=url.split(":")[0], seconds_to_dead=round(seconds, 1),
           attempts=[d.attempt for d in dead], errors=[e.error for d in dead for e in d.errors],
           **report.summary())
    assert [d.id for d in dead] == [poison_id], f"{dead}\n{tail}"
    assert dead[0].attempt == MAX_ATTEMPTS
    assert [e.error for e in dead[0].errors] == [
        "worker process exited with code 1 while handling it"] * MAX_ATTEMPTS
    assert dead[0].body == {"n": 0, "exit": True}
    assert report.ok, f"{report}\n{tail}"  # the 200 others: exactly once, none stuck
    assert stats.dead == 1 and stats.dead_lettered == 1
    assert [e for e in effects.rows() if e[1] == 0] == []  # the poison never took effect
    assert codes == [0], tail
    assert tail.count(f"exited with code 1 while handling 1 message(s): poison/{poison_id}") \
        >= MAX_ATTEMPTS, tail
