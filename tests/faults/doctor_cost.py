"""Not a test: ``python tests/faults/doctor_cost.py URL`` (an empty database) measures
what ``hailq doctor`` costs (docs/performance.md, "The doctor"): 5 queues with 1000 dead
letters each (every one failed 3 attempts with one of 10 errors); the median of 5 runs
of ``hailq doctor --json`` against ``hailq stats --json`` (the same figures read, the
same process start), in the same run."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

import hailq

url = sys.argv[1]
with hailq.connect(url) as b:
    for qn in range(5):
        q = b.queue(f"q{qn}", max_attempts=3, retry={"base": 0.001, "jitter": 0})
        q.send_many([{"n": i} for i in range(1000)])
        while q.stats().dead < 1000:
            ms = q.receive(100)
            if not ms:
                time.sleep(0.01)
            for m in ms:
                m.nack(delay=0, error=f"Traceback\nValueError: error {int(m.id[-1], 36) % 10}")


def run(*args: str) -> float:
    t = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "hailq.cli.main", *args, "--json",
                           "--url", url], capture_output=True, text=True)
    assert done.returncode in (0, 3), done.stderr
    return time.perf_counter() - t


doctor: list[float] = []
stats: list[float] = []
for _ in range(5):
    doctor.append(run("doctor"))
    stats.append(run("stats"))
d, s = statistics.median(doctor), statistics.median(stats)
print(f"{url.split(':')[0]}: doctor {d * 1000:.0f} ms, stats {s * 1000:.0f} ms, "
      f"ratio {d / s:.2f}")
