#!/usr/bin/env python3
"""CPU instructions per message of a worker's drain, counted by callgrind.

    .venv/bin/python scripts/drain_instructions.py
    .venv/bin/python scripts/drain_instructions.py --postgres postgresql://postgres@127.0.0.1:5432/test

A drain's wall-clock rate on this machine moves by a fifth between runs; the
instructions the worker's process spends on a message do not. A ``Worker`` of 8 slots
with a no-op handler runs in this process (no scheduler: the code before it had none)
and drains a queue filled by ``send_many``, once with ``--small`` messages and once with
``--large``, each under ``valgrind --tool=callgrind``; the difference divided by the
messages between is one message's cost in the worker's process (fetch loop, claim and
ack statements on the client side, slot threads, lease keeper, figures), without
start-up. The database server's work is not counted. ``--off figures`` and ``--off
inbox`` switch the figures' recording or the inbox marks off (an experiment, not an
option). ``--storage`` drains with a plain loop of ``ack_and_receive`` of 8 instead of a
worker: the storage path's share alone. Whatever hailq is first on ``PYTHONPATH`` is
counted, so the same script measures an older checkout. Needs valgrind; not part of
``make test``.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

import hailq
from hailq.runtime.worker import Worker


def drain(url: str, n: int, off: list[str]) -> None:
    """Fill ``n`` messages, then drain them with an in-process worker of 8 slots."""
    with hailq.connect(url) as broker:
        queue = broker.queue("drain")
        for start in range(0, n, 1000):
            queue.send_many([{"i": i} for i in range(start, min(n, start + 1000))])
        if "storage" in off:
            done: list[hailq.Message] = []
            while True:
                _, done = queue.ack_and_receive(done, 8)
                if not done:
                    return
        if "figures" in off:
            from hailq.observe.recorder import FigureRecorder
            FigureRecorder.observe = lambda *args, **kwargs: None  # type: ignore[method-assign]
        if "inbox" in off:
            from hailq.observe import inbox_use
            inbox_use.begin = lambda message_id: None
            inbox_use.end = lambda message_id: False
        options = ({"scheduler": False}
                   if "scheduler" in Worker.__init__.__code__.co_varnames else {})
        worker = Worker(broker, lambda message: None, queues=["drain"], concurrency=8,
                        **options)  # type: ignore[arg-type]
        thread = threading.Thread(target=worker.run, kwargs={"handle_signals": False})
        thread.start()
        while queue.stats().ready + queue.stats().in_flight > 0:
            time.sleep(0.2)
        worker.stop()
        thread.join()


def count(url: str, n: int, off: list[str]) -> int:
    """Instructions of one child process that fills and drains ``n`` messages."""
    with tempfile.TemporaryDirectory(prefix="hailq-drain-instr-") as folder:
        child_url = url if url.startswith("postgresql") else f"sqlite:///{folder}/drain.db"
        if child_url.startswith("postgresql"):
            schema = f"hailq_drain_instr_{os.getpid()}_{n}"
            child_url = f"{url}{'&' if '?' in url else '?'}schema={schema}"
        offs = [arg for o in off for arg in (("--storage",) if o == "storage" else ("--off", o))]
        done = subprocess.run(
            ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
             __file__, "--child", str(n), "--url", child_url, *offs],
            capture_output=True, text=True, check=True)
        if child_url.startswith("postgresql"):
            import psycopg
            with psycopg.connect(url.split("?")[0], autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise SystemExit(f"no count from callgrind:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", help="a PostgreSQL URL; SQLite (a temporary file) "
                                           "without it")
    parser.add_argument("--small", type=int, default=1000)
    parser.add_argument("--large", type=int, default=5000)
    parser.add_argument("--off", action="append", default=[], choices=("figures", "inbox"))
    parser.add_argument("--storage", action="store_true",
                        help="a loop of ack_and_receive of 8, no worker")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        drain(args.url, args.child, [*args.off, *(["storage"] if args.storage else [])])
        return
    url = args.postgres or "sqlite"
    off = [*args.off, *(["storage"] if args.storage else [])]
    small, large = count(url, args.small, off), count(url, args.large, off)
    what = "ack_and_receive loop" if args.storage else "worker"
    print(f"hailq from {os.path.dirname(hailq.__file__)}, {url.split('?')[0]}, {what}, off: "
          f"{', '.join(args.off) or 'nothing'}: {(large - small) / (args.large - args.small):,.0f} "
          "instructions a message")


if __name__ == "__main__":
    main()
