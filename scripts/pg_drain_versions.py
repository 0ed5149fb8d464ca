#!/usr/bin/env python3
"""A PostgreSQL worker drain measured through public API only, to compare hailq versions.

    PYTHONPATH=/path/to/other/checkout/src .venv/bin/python scripts/pg_drain_versions.py

Fills 20,000 messages (``--fill many``: send_many of 1,000; ``single``: single sends
from 4 threads), starts one ``hailq worker`` of 8 threads with a no-op handler, and
times the drain from its first ack to an empty queue by counting rows with plain SQL
every 50 ms (``stats()`` differs between versions; polling it often slowed the drain).
Whatever hailq is first on ``PYTHONPATH`` is measured, so the same script runs
against an older checkout. Run versions in turns, several times: this machine moves
by a fifth between runs. Not part of ``make test``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import threading
import time

import psycopg

import hailq

SCHEMA = "hailq_drain_versions"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--fill", choices=("many", "single"), default="many")
    parser.add_argument("-n", type=int, default=20_000)
    args = parser.parse_args()
    base, n = args.postgres, args.n
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
    url = f"{base}?schema={SCHEMA}"
    broker = hailq.connect(url)
    queue = broker.queue("drain")
    started = time.monotonic()
    if args.fill == "many":
        for start in range(0, n, 1000):
            queue.send_many([{"i": i} for i in range(start, min(n, start + 1000))])
    else:
        def produce(first: int) -> None:
            for i in range(first, n, 4):
                queue.send({"i": i})

        threads = [threading.Thread(target=produce, args=(k,)) for k in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    fill = time.monotonic() - started
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"VACUUM ANALYZE {SCHEMA}.messages")
        worker = subprocess.Popen(
            [sys.executable, "-m", "hailq.cli.worker", "hailq.bench.handlers:noop",
             "--queue", "drain", "--concurrency", "8", "--url", url,
             "--log-level", "WARNING"], stdin=subprocess.DEVNULL)
        first = gone = None
        while True:
            left = conn.execute(f"SELECT count(*) FROM {SCHEMA}.messages").fetchone()[0]
            now = time.perf_counter()
            if first is None and left < n:
                first, gone = now, n - left
            if left == 0:
                break
            time.sleep(0.05)
    worker.terminate()
    worker.wait(30)
    broker.close()
    assert first is not None and gone is not None
    print(f"hailq {getattr(hailq, '__version__', '?')} from {hailq.__file__}: fill "
          f"{args.fill} {fill:.1f} s, drain {(n - gone) / (now - first):,.0f}/s")
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")


if __name__ == "__main__":
    main()
