"""``hailq autoscale`` with real worker processes (rule 24), on both backends:
sleep-bound handlers, so two cores suffice. The saturated downstream, a longer run,
is in tests/faults/test_autoscale_saturation.py."""

from __future__ import annotations

import itertools
import signal
import time
from pathlib import Path

from autoscale_support import Pool, alive, decisions, wait_for

import hailq

FAST = ("--interval", "1.5", "--reprobe", "5", "--grace", "20", "--poll", "0.2")


def test_rule_24_backlog_grows_the_pool_from_one_and_an_empty_queue_returns_it_to_min(
        url: str, tmp_path: Path) -> None:
    broker = hailq.connect(url)
    pool = None
    try:
        jobs = broker.queue("jobs", slo={0: 5})
        jobs.send_many([{"n": i} for i in range(4000)])
        pool = Pool(url, tmp_path, "--queue", "jobs", "--min", "1", "--max", "3", *FAST)
        wait_for("the first worker", lambda: pool.workers() == 1, log=pool.close)
        wait_for("three workers", lambda: pool.workers() == 3, log=pool.close)
        made = decisions(broker, "jobs")
        grown = [(before.workers, d.workers) for before, d in itertools.pairwise(made)
                 if d.decision == "grow"]
        # (a slow machine may record a hold while the first worker still starts)
        first = next(d for d in made if d.decision != "hold")
        assert first.decision == "grow" and first.workers == 2  # from 1
        assert all(after == before + 1 for before, after in grown)  # one step at a time
        assert all("probing" in d.reason for d in made if d.decision == "grow")

        jobs.purge()  # the backlog is gone: back to --min
        wait_for("one worker again", lambda: pool.workers() == 1, log=pool.close)
        last = broker.autoscalers("jobs")
        assert len(last) == 1 and last[0].workers == 1 and last[0].minimum == 1
        shrunk = [d for d in decisions(broker, "jobs") if d.decision == "shrink"]
        assert shrunk and shrunk[-1].workers == 1
        assert "queue empty" in shrunk[-1].reason or "backlog 0" in shrunk[-1].reason
        assert pool.most == 3  # --max, never more
        # Drained with SIGTERM: whatever the two finished, nothing came back.
        wait_for("in-flight work to finish", lambda: jobs.stats().in_flight == 0)
        assert jobs.stats().redelivered == 0
    finally:
        if pool is not None:
            log = pool.close()
            print(log[-4000:])
        broker.close()
    assert pool.process.returncode == 0
    assert all(not alive(pid) for pid in pool.seen)


def test_rule_24_a_killed_autoscaler_leaves_no_worker_running_unsupervised(
        url: str, tmp_path: Path) -> None:
    broker = hailq.connect(url)
    pool = None
    try:
        jobs = broker.queue("jobs", slo={0: 5})
        jobs.send_many([{"n": i} for i in range(4000)])
        pool = Pool(url, tmp_path, "--queue", "jobs", "--min", "1", "--max", "2", *FAST)
        wait_for("two workers", lambda: pool.workers() == 2, log=pool.close)
        children = set(pool.seen)
        pool.process.send_signal(signal.SIGKILL)
        pool.process.wait(10)
        begun = time.monotonic()
        # Each child gets SIGTERM from the kernel as its parent dies, finishes its one
        # message (0.1 s) and exits; well within its 20 s grace.
        wait_for("the workers to exit", lambda: not any(alive(p) for p in children),
                 timeout=60)
        print(f"workers gone {time.monotonic() - begun:.2f} s after the SIGKILL")
        assert pool.most <= 2
        wait_for("their leases to be given back or acked",
                 lambda: jobs.stats().in_flight == 0, timeout=60)
        assert jobs.stats().redelivered == 0  # they drained: nothing came back
        before = jobs.stats().acked
        time.sleep(0.5)  # the scenario: a moment in which a consumer left over would ack
        assert jobs.stats().acked == before  # nobody consumes on
    finally:
        if pool is not None:
            print(pool.close()[-4000:])
        broker.close()


def test_rule_24_33_a_rate_limited_queue_with_a_backlog_gets_no_more_workers(
        url: str, tmp_path: Path) -> None:
    broker = hailq.connect(url)
    pool = None
    try:
        # 5/s x 0.1 s per message keeps half a worker busy: the limit, not the workers,
        # sets the pace, however large the backlog. (At 10/s one worker is exactly busy,
        # and on a loaded machine it falls just short of the limit: more would help.)
        jobs = broker.queue("jobs", slo={0: 5}, rate="5/s")
        jobs.send_many([{"n": i} for i in range(2000)])
        pool = Pool(url, tmp_path, "--queue", "jobs", "--min", "1", "--max", "4", *FAST)
        wait_for("a rate-limited decision", lambda: any(
            "rate-limited" in d.reason for d in decisions(broker, "jobs")), log=pool.close)
        wait_for("three more decisions", lambda: len(decisions(broker, "jobs")) >= 4,
                 log=pool.close)
        made = decisions(broker, "jobs")
        assert pool.most == 1 and all(d.workers == 1 for d in made)
        assert all(d.ceiling is None for d in made)  # a limit is no saturation point
        assert broker.get_queue("jobs").figures().desired_workers <= 2
    finally:
        if pool is not None:
            print(pool.close()[-4000:])
        broker.close()
