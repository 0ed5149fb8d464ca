#!/usr/bin/env python3
"""How close can hailq's SQLite receive+ack come to the bare driver? Three loops side by side.

    .venv/bin/python scripts/sqlite_floor.py --batch 10 --runs 7

- **raw**: the benchmark's bare loop (``hailq.bench.raw.RawSQLite``: one narrow table,
  one partial index, claim ``UPDATE … RETURNING``, ack ``DELETE``).
- **hailq SQL**: hailq's own claim and batch-ack statements (``queries.sql``) on a
  database hailq created and filled, run straight through ``sqlite3`` on a connection
  opened the way the backend opens its own: no Python objects, no parameters checked,
  no messages built. This is the floor the Python layer sits on.
- **raw, same job**: the bare loop made to do what a lease must: a claim first gives back
  ended leases (found through an index on them, as hailq's claim does), draws a lease
  token and counts the attempt; the ack deletes only rows that still hold its token.
  Still no priorities, order keys, JSON or checks.
- **hailq**: ``queue.receive(batch)`` then ``queue.ack_many(...)``, as a user writes it.
- **hailq, one transaction**: ``queue.ack_and_receive(...)``, the worker's path: each
  transaction acks the previous batch and leases the next.
- **raw, one transaction**: the bare loop doing the same, ack and claim in one commit.

Each run drains ``--messages`` messages in one process, the loops in turns so a noisy
neighbour shows in all of them. Prints medians, and each loop as a share of the bare
loops: the median of each run's ratio (as ``hailq bench`` does). Not part of
``make test``.
"""

from __future__ import annotations

import argparse
import random
import secrets
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

import hailq  # noqa: E402
from hailq.backends.sqlite.backend import (  # noqa: E402
    PAGE_SIZE,
    Q,
    SQLiteBackend,
    _for_rows,
)
from hailq.bench.raw import RawSQLite  # noqa: E402

BODY = {"claim": 8311}


def fill(folder: str, n: int, figures: bool = True, **settings: Any) -> hailq.Queue:
    queue = hailq.connect(f"sqlite:///{folder}/hailq.db", figures=figures).queue(
        "bench", lease=60, **settings)
    for start in range(0, n, 1000):
        queue.send_many([BODY] * min(1000, n - start))
    return queue


def raw_loop(folder: str, n: int, batch: int, kind: type[RawSQLite] = RawSQLite) -> float:
    raw = kind(f"{folder}/raw.db")
    raw.fill(n)
    start = time.perf_counter()
    while ids := raw.claim(batch):
        raw.ack(ids)
    elapsed = time.perf_counter() - start
    raw.close()
    return n / elapsed


class RawLeases(RawSQLite):
    """The bare loop with a lease that does its job (see the module's docstring)."""

    def __init__(self, path: str) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None, timeout=60)
        self.synchronous = ""
        self.conn.execute(f"PRAGMA page_size={PAGE_SIZE}")
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("CREATE TABLE raw_jobs (id INTEGER PRIMARY KEY, state INTEGER "
                          "NOT NULL, body BLOB, lease REAL, token INTEGER, attempt INTEGER "
                          "NOT NULL DEFAULT 0)")
        self.conn.execute("CREATE INDEX raw_ready ON raw_jobs (id) WHERE state = 0")
        self.conn.execute("CREATE INDEX raw_leased ON raw_jobs (lease) WHERE state = 1")
        self.token = 0

    def claim(self, n: int) -> list[int]:
        if self.synchronous != "NORMAL":
            self.conn.execute("PRAGMA synchronous=NORMAL")
            self.synchronous = "NORMAL"
        now = time.time()
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.execute("UPDATE raw_jobs SET state = 0 WHERE state = 1 AND lease < ?",
                          (now,))
        self.token = random.getrandbits(63)
        rows = self.conn.execute(
            "UPDATE raw_jobs SET state = 1, lease = ?, token = ?, attempt = attempt + 1 "
            "WHERE id IN (SELECT id FROM raw_jobs WHERE state = 0 ORDER BY id LIMIT ?) "
            "RETURNING id, body, token, attempt", (now + 60, self.token, n)).fetchall()
        self.conn.execute("COMMIT")
        return [r[0] for r in rows]

    def ack(self, ids: list[int]) -> None:
        marks = ",".join("?" * len(ids))
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.execute(f"DELETE FROM raw_jobs WHERE id IN ({marks}) AND token = ?",
                          [*ids, self.token])
        self.conn.execute("COMMIT")



def raw_one_tx_loop(folder: str, n: int, batch: int) -> float:
    raw = RawSQLite(f"{folder}/raw.db")
    raw.fill(n)
    conn = raw.conn
    conn.execute("PRAGMA synchronous=NORMAL")
    start = time.perf_counter()
    ids: list[int] = []
    while True:
        conn.execute("BEGIN IMMEDIATE")
        if ids:
            conn.execute(f"DELETE FROM raw_jobs WHERE id IN ({','.join('?' * len(ids))})", ids)
        ids = [r[0] for r in conn.execute(
            "UPDATE raw_jobs SET state = 1, lease = unixepoch() + 30 WHERE id IN (SELECT id "
            "FROM raw_jobs WHERE state = 0 ORDER BY id LIMIT ?) RETURNING id, body",
            (batch,)).fetchall()]
        conn.execute("COMMIT")
        if not ids:
            break
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
        token, lease_until = secrets.token_hex(8), now + 60
        rows = conn.execute(claim, {"queue": "bench", "n": batch, "token": token,
                                    "lease_until": lease_until}).fetchall()
        if rows:
            conn.execute(_for_rows("message_claim_mark", len(rows)),
                         [token, lease_until, *[r[10] for r in rows]])
            conn.execute(Q["fence_take"], {"n": len(rows)})  # rule 41's fencing tokens
        conn.execute("COMMIT")
        if not rows:
            break
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(_for_rows("message_ack_seq", len(rows)), [
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


def hailq_one_tx_loop(folder: str, n: int, batch: int) -> float:
    queue = fill(folder, n)
    start = time.perf_counter()
    got = queue.receive(batch)
    while got:
        _, got = queue.ack_and_receive(got, batch)
    return n / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    loops: dict[str, Callable[[str, int, int], float]] = {
        "raw": raw_loop, "raw, same job": partial(raw_loop, kind=RawLeases), "hailq SQL": sql_loop,
        "hailq": hailq_loop, "hailq, one transaction": hailq_one_tx_loop,
        "raw, one transaction": raw_one_tx_loop}
    rates: dict[str, list[float]] = {name: [] for name in loops}
    for _ in range(args.runs):
        for name, loop in loops.items():
            with tempfile.TemporaryDirectory(prefix="hailq-floor-") as folder:
                rates[name].append(loop(folder, args.messages, args.batch))

    def share(name: str, of: str) -> float:
        return statistics.median(a / b for a, b in zip(rates[name], rates[of], strict=True))

    print(f"receive+ack, batch {args.batch}, {args.messages:,} messages, "
          f"medians of {args.runs} runs")
    for name, values in rates.items():
        rate = statistics.median(values)
        print(f"  {name:24s} {rate:>9,.0f} msgs/s  {1e6 / rate:5.1f} µs/msg  "
              f"{share(name, 'raw'):.2f} of raw  {share(name, 'raw, same job'):.2f} of "
              f"raw, same job  {share(name, 'raw, one transaction'):.2f} of raw, one "
              "transaction")


if __name__ == "__main__":
    main()
