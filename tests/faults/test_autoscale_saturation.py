"""``hailq autoscale`` against a saturated downstream (rule 24, the drowned results
database of the hailstorm): handlers need one of 4 slots of a shared resource (file
locks), so a 5th concurrent worker only waits. The pool must settle near 4, not at
``--max``. Real processes, sleep-bound handlers."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

RUNTIME = Path(__file__).resolve().parent.parent / "runtime"
if str(RUNTIME) not in sys.path:
    sys.path.insert(0, str(RUNTIME))

from autoscale_support import Pool, decisions, wait_for  # noqa: E402

import hailq  # noqa: E402


@pytest.mark.slow
@pytest.mark.parametrize("order", ["priority", "deadline"])
@pytest.mark.parametrize("backend_name", ["sqlite", "postgres"])
def test_rule_24_a_downstream_that_serves_four_settles_the_pool_near_four_not_at_max(
        url: str, tmp_path: Path, order: str) -> None:
    """In deadline order (rule 41) the target is the largest useful pool (the backlog is
    late at once: 20,000 runs of 0.1 s due within 5 s), and the downstream stops it the
    same way."""
    downstream = tmp_path / "downstream"
    downstream.mkdir()
    for n in range(4):
        (downstream / f"slot{n}").touch()
    broker = hailq.connect(url)
    pool = None
    try:
        ordered = {"order": "deadline"} if order == "deadline" else {}
        jobs = broker.queue("jobs", slo={0: 5}, **ordered)
        jobs.send_many([{"n": i} for i in range(20_000)])
        pool = Pool(url, tmp_path, "--queue", "jobs", "--min", "1", "--max", "8",
                    "--interval", "2", "--reprobe", "20", "--grace", "20", "--poll", "0.2",
                    env={"HAILQ_TEST_DOWNSTREAM": str(downstream)})
        wait_for("a saturation point", lambda: any(
            d.ceiling is not None for d in decisions(broker, "jobs")),
            timeout=240, log=pool.close)
        begun = time.monotonic()
        time.sleep(30.0)  # at the point, and one probe above it again (--reprobe 20)
        later = [n for at, n in pool.counts if at >= begun]
        found = decisions(broker, "jobs")
        points = {d.ceiling for d in found if d.ceiling is not None}
        print("saturation points:", points, "pool sizes after:", sorted(set(later)))
        for d in found:
            print(f"{d.decision:6} {d.workers} {d.reason}")
        assert points <= {3, 4, 5}  # near 4
        assert pool.most <= 6 < 8  # never grown towards --max
        assert sum(3 <= n <= 5 for n in later) >= 0.9 * len(later)
        assert broker.get_queue("jobs").figures().desired_workers <= 5  # capped by the point
        if order == "deadline":  # it wanted more than the downstream takes, and said why
            assert any("no pool meets every deadline target (late: " in d.reason
                       for d in found)
            assert (broker.get_queue("jobs").figures().deadline_pool or 0) > 5
    finally:
        if pool is not None:
            print(pool.close()[-3000:])
        broker.close()
