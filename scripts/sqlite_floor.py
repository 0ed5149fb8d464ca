#!/usr/bin/env python3
"""How close can hailq's SQLite receive+ack come to the bare driver? Three loops side by side.

    .venv/bin/python scripts/sqlite_floor.py --batch 10 --runs 7

- **raw**: the benchmark's bare loop (``hailq.bench.raw.RawSQLite``: one narrow table,
  one partial index, claim ``UPDATE … RETURNING``, ack ``DELETE``).
- **hailq SQL**: hailq's own claim and batch-ack statements (``queries.sql``) on a
  database hailq created and filled, run straight through ``sqlite3`` on a connection
  opened the way the backend opens its own: no Python objects, no parameters checked,
  no messages built. This is the floor the Python layer sits on.
- **hailq**: ``queue.receive(batch)`` then ``queue.ack_many(...)``, as a user writes it.

Each run drains ``--messages`` messages in one process, the three loops in turns so a
noisy neighbour shows in all of them. Prints medians and each loop as a share of raw.
Not part of ``make test``.
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

import hailq  # noqa: E402
from hailq.backends.sqlite.backend import Q, SQLiteBackend, _ack_by_seq  # noqa: E402
from hailq.bench.raw import RawSQLite  # noqa: E402

BODY = {"claim": 8311}


def fill(folder: str, n: int) -> hailq.Queue:
    queue = hailq.connect(f"sqlite:///{folder}/hailq.db").queue("bench", lease=60)
    for start in range(0, n, 1000):
        queue.send_many([BODY] * min(1000, n - start))
    return queue


def raw_loop(folder: str, n: int, batch: int) -> float:
    raw = RawSQLite(f"{folder}/raw.db")
    raw.fill(n)
    start = time.perf_counter()
    while ids := raw.claim(batch):
        raw.ack(ids)
    elapsed = time.perf_counter() - start
    raw.close()
    return n / elapsed


def sql_loop(folder: str, n: int, batch: int) -> float:
    fill(folder, n)
    conn = SQLiteBackend(f"{folder}/hailq.db")._open()
    conn.execute("PRAGMA synchronous=NORMAL")
    claim = Q["message_claim"]
    start = time.perf_counter()
    while True:
        now = time.time()
        conn.execute("BEGIN IMMEDIATE")
        rows = conn.execute(claim, {"queue": "bench", "n": batch, "now": now, "lease": 60,
                                    "token": secrets.token_hex(8)}).fetchall()
        conn.execute("COMMIT")
        if not rows:
            break
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(_ack_by_seq(len(rows)), [
            *[r[10] for r in rows], *[v for r in rows for v in (r[10], r[0], r[1])],
            "bench", now]).fetchall()
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - start
    conn.close()
    return n / elapsed


def hailq_loop(folder: str, n: int, batch: int) -> float:
    queue = fill(folder, n)
    start = time.perf_counter()
    while got := queue.receive(batch):
        queue.ack_many(got)
    return n / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    loops: dict[str, Callable[[str, int, int], float]] = {
        "raw": raw_loop, "hailq SQL": sql_loop, "hailq": hailq_loop}
    rates: dict[str, list[float]] = {name: [] for name in loops}
    for _ in range(args.runs):
        for name, loop in loops.items():
            with tempfile.TemporaryDirectory(prefix="hailq-floor-") as folder:
                rates[name].append(loop(folder, args.messages, args.batch))
    raw = statistics.median(rates["raw"])
    print(f"receive+ack, batch {args.batch}, {args.messages:,} messages, "
          f"medians of {args.runs} runs")
    for name, values in rates.items():
        rate = statistics.median(values)
        print(f"  {name:10s} {rate:>9,.0f} msgs/s  {1e6 / rate:5.1f} µs/msg  "
              f"{rate / raw:.2f} of raw")


if __name__ == "__main__":
    main()
