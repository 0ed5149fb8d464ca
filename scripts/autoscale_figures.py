#!/usr/bin/env python3
"""How fast ``hailq autoscale`` finds a saturated downstream, and what it holds there.

    .venv/bin/python scripts/autoscale_figures.py --runs 3
    .venv/bin/python scripts/autoscale_figures.py --url 'postgresql://postgres@127.0.0.1:5432/test'

Each run: a fresh database (a SQLite file, or a PostgreSQL schema of its own), a
queue ``jobs`` with ``slo={0: 5}`` holding 20,000 messages, handlers of 0.1 s
(tests/runtime/autoscale_handlers.py) behind a downstream that serves 4 at once
(4 slot files), and ``hailq autoscale --min 1 --max 8 --interval 2 --reprobe 20``.
The run ends 30 s after the first saturation point. Printed, as medians over the
runs: seconds from the start to the first saturation point, the point, completions
per second while holding at it (the downstream serves at most 4 / 0.1 s = 40/s) and
its ratio to that ceiling, and the most worker processes seen at once. Not part of
``make test``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNTIME = ROOT / "tests" / "runtime"
sys.path.insert(0, str(RUNTIME))

from autoscale_support import Pool  # noqa: E402

import hailq  # noqa: E402

CEILING = 4 / 0.1  # completions per second the downstream serves at most


def one_run(base_url: str | None, folder: Path) -> dict[str, float]:
    if base_url is None:
        url = f"sqlite:///{folder / 'hailq.db'}"
    else:
        url = f"{base_url}{'&' if '?' in base_url else '?'}schema=as_{uuid.uuid4().hex[:10]}"
    downstream = folder / "downstream"
    downstream.mkdir()
    for n in range(4):
        (downstream / f"slot{n}").touch()
    broker = hailq.connect(url)
    jobs = broker.queue("jobs", slo={0: 5})
    jobs.send_many([{"n": i} for i in range(20_000)])
    trace = folder / "trace.jsonl"
    begun = time.monotonic()
    pool = Pool(url, folder, "--queue", "jobs", "--min", "1", "--max", "8", "--interval", "2",
                "--reprobe", "20", "--poll", "0.2", "--trace", str(trace),
                env={"HAILQ_TEST_DOWNSTREAM": str(downstream)})
    found_at = None
    try:
        while time.monotonic() - begun < 300:
            lines = trace.read_text().splitlines() if trace.exists() else []
            if any("saturated at" in json.loads(x)["decision"]["reason"] for x in lines):
                found_at = time.monotonic() - begun
                break
            time.sleep(0.5)
        time.sleep(30)
    finally:
        pool.process.send_signal(signal.SIGTERM)
        pool.close()
        if base_url is not None:
            import psycopg

            schema = url.rsplit("schema=", 1)[1]
            with psycopg.connect(base_url, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        broker.close()
    lines = [json.loads(x) for x in trace.read_text().splitlines()]
    points = [x["decision"]["reason"] for x in lines if "saturated at" in x["decision"]["reason"]]
    point = int(points[0].split()[2].rstrip(":")) if points else 0
    held = [x["observation"]["completed"] / x["observation"]["elapsed"] for x in lines
            if x["observation"]["workers"] == point and x["observation"]["settled"]
            and x["decision"]["action"] == "hold"]
    throughput = statistics.median(held) if held else 0.0
    return {"seconds_to_point": found_at or float("nan"), "point": point,
            "throughput_at_point": throughput, "ratio_to_ceiling": throughput / CEILING,
            "most_processes": pool.most}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="a PostgreSQL URL (default: a SQLite file per run)")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("PYTHONPATH", str(RUNTIME))
    results = []
    for n in range(args.runs):
        folder = Path(tempfile.mkdtemp(prefix="hailq-autoscale-"))
        try:
            results.append(one_run(args.url, folder))
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        print(f"run {n + 1}: {results[-1]}", flush=True)
    medians = {k: statistics.median(r[k] for r in results) for k in results[0]}
    print(json.dumps({"backend": "postgresql" if args.url else "sqlite", "runs": args.runs,
                      "median": medians}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
