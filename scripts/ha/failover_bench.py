"""Failover figures: the median of several runs of the failover storm.

    .venv/bin/python scripts/ha/failover_bench.py [--runs 5] [--async]

Each run is ``tests/faults/test_failover.py``'s storm on a fresh primary and
standby (2,000 messages, 2 producer processes, 3 worker processes, the primary
SIGKILLed once 40% were sent, the standby promoted at once). Prints each run's
figures and the medians of: the promotion, the time from the kill to the first
message done on the new primary, the longest pause of the producers' sends, and
how soon an idle worker woke for a new message afterwards. ``--async`` runs the
asynchronous-replication storm (4,000 messages) and adds the count of
acknowledged sends lost.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = {
    "sync": "tests/faults/test_failover.py::"
            "test_rule_31_failover_to_a_synchronous_standby_loses_no_acknowledged_send",
    "async": "tests/faults/test_failover.py::"
             "test_rule_31_failover_to_an_asynchronous_standby_loses_only_the_last_"
             "acknowledged_sends",
}
KEYS = ("promote_s", "kill_to_first_done_s", "sends_paused_s", "idle_wake_s", "lost",
        "lost_oldest_ack_before_kill_s", "producer_errors", "redelivered")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--async", dest="asynchronous", action="store_true")
    args = parser.parse_args()
    test = TESTS["async" if args.asynchronous else "sync"]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        figures = Path(tmp) / "figures.jsonl"
        for i in range(args.runs):
            done = subprocess.run(
                [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "",
                 test], cwd=ROOT, env=dict(os.environ, FAULTS_FIGURES=str(figures)),
                capture_output=True, text=True)
            if done.returncode:
                print(done.stdout[-3000:], done.stderr[-2000:], file=sys.stderr)
                return done.returncode
            rows.append(json.loads(figures.read_text().splitlines()[-1]))
            print(f"run {i + 1}: " + ", ".join(f"{k}={rows[-1].get(k)}" for k in KEYS),
                  flush=True)
    print(f"median of {len(rows)} runs ({'async' if args.asynchronous else 'sync'}):")
    for key in KEYS:
        values = [float(r[key]) for r in rows if r.get(key) is not None]
        if values:
            print(f"  {key}: {statistics.median(values):g} (min {min(values):g}, "
                  f"max {max(values):g})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
