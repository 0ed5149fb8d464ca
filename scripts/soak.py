#!/usr/bin/env python3
"""Soak test: N minutes at R messages/s through real worker processes that keep restarting.

    .venv/bin/python scripts/soak.py --url sqlite:///soak.db --minutes 30 --rate 100
    .venv/bin/python scripts/soak.py --url 'postgresql://postgres@127.0.0.1:5432/test?schema=soak'

A producer thread sends numbered messages at ``--rate`` per second. ``--workers``
``hailq worker`` processes consume them with the fault suite's handler
(tests/faults/fault_handlers.py: each effect goes through the inbox into an
effects store). One worker runs for the whole soak (its memory is the one that
must not grow); the others are SIGTERMed and restarted in turn every
``--restart-every`` seconds. Every ``--report-every`` seconds one line of figures
is printed; at the end the producer stops, the queue drains, the ledger checker
runs, and a JSON report is printed (and written to ``--out``):

- lost / duplicated / unexpected / stuck / dead, from the ledger;
- RSS of the long-lived worker and of this process, first vs last sample;
- SQLite: WAL file size, first vs max vs last; PostgreSQL: dead tuples of hailq's tables;
- end-to-end latency (send -> effect committed) p50/p99 of the first vs the last
  window (5 minutes, or a third of the run when it is shorter).

Exit status 1 when the ledger is not clean. Not part of ``make test``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]

import hailq  # noqa: E402
from faults.ledger import EffectStore, Ledger, check_queue  # noqa: E402
from faults.workers import WorkerFleet, unfinished  # noqa: E402

QUEUE = "soak"


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def percentile(values: list[float], p: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


class Producer(threading.Thread):
    def __init__(self, q: hailq.Queue, ledger: Ledger, rate: float) -> None:
        super().__init__(daemon=True)
        self.q, self.ledger, self.rate = q, ledger, rate
        self.sent_at: dict[int, float] = {}
        self.stop = threading.Event()
        self.errors = 0

    def run(self) -> None:
        n = 0
        start = time.monotonic()
        while not self.stop.is_set():
            due = start + n / self.rate
            pause = due - time.monotonic()
            if pause > 0:
                self.stop.wait(pause)
                continue
            batch = max(1, min(100, int((time.monotonic() - due) * self.rate) + 1))
            numbers = list(range(n, n + batch))
            now = time.time()
            try:
                ids = self.q.send_many([{"n": i} for i in numbers])
            except hailq.StorageError:
                self.errors += 1
                time.sleep(0.1)
                continue
            self.ledger.add(ids, numbers)
            for i in numbers:
                self.sent_at[i] = now
            n += batch


def storage_figure(url: str, store: EffectStore) -> dict[str, Any]:
    if url.startswith("sqlite:"):
        wal = Path(url[len("sqlite:///"):].split("?")[0] + "-wal")
        return {"wal_mib": round(wal.stat().st_size / 2**20, 2) if wal.exists() else 0.0}
    with store._conn() as conn:
        rows = conn.execute(
            "SELECT relname, n_dead_tup, n_live_tup FROM pg_stat_user_tables "
            "WHERE schemaname = %s ORDER BY relname", (store.schema,)).fetchall()
    return {"dead_tuples": {r[0]: int(r[1]) for r in rows if r[1]}}


def latencies(store: EffectStore, sent_at: dict[int, float]) -> list[tuple[float, float]]:
    """``(sent at, seconds until the effect committed)`` per message with an effect."""
    with store._conn() as conn:
        rows = conn.execute("SELECT n, min(at) FROM effects GROUP BY n").fetchall()
    return sorted((sent_at[int(n)], float(at) - sent_at[int(n)])
                  for n, at in rows if int(n) in sent_at)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=None, help="broker URL (default: a temporary SQLite)")
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--rate", type=float, default=100.0, help="messages per second")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--restart-every", type=float, default=20.0,
                        help="seconds between restarts of one (rotating) worker")
    parser.add_argument("--report-every", type=float, default=15.0)
    parser.add_argument("--out", default=None, help="also write the JSON report here")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="hailq-soak-"))
    url = args.url or f"sqlite:///{work / 'soak.db'}"
    if url.startswith("sqlite:"):
        store = EffectStore(f"sqlite:///{work / 'effects.db'}")
    else:
        base, _, query = url.partition("?")
        opts = dict(p.split("=", 1) for p in query.split("&") if p)
        store = EffectStore(base, opts.get("schema", "hailq"))
    store.create()
    ledger = Ledger()
    duration = args.minutes * 60
    window = min(300.0, duration / 3)

    with hailq.connect(url) as broker:
        q = broker.queue(QUEUE, lease=10, max_attempts=10,
                         retry={"base": 0.1, "max": 2.0, "jitter": 0})
        fleet = WorkerFleet(url, QUEUE, store, work, processes=args.workers,
                            concurrency=args.concurrency, grace=5)
        steady = fleet.procs[0]
        producer = Producer(q, ledger, args.rate)
        t0 = time.monotonic()
        producer.start()
        samples: list[dict[str, Any]] = []
        next_restart = t0 + args.restart_every
        next_report = t0 + min(5.0, args.report_every)
        turn = 0
        try:
            while time.monotonic() - t0 < duration:
                time.sleep(0.2)
                now = time.monotonic()
                if now >= next_restart and args.workers > 1:
                    i = 1 + turn % (args.workers - 1)  # never the steady worker
                    turn += 1
                    fleet.procs[i].send_signal(signal.SIGTERM)
                    fleet.procs[i].wait(30)
                    fleet.procs[i] = fleet._start()
                    next_restart = now + args.restart_every
                fleet.restart_dead()
                if now >= next_report:
                    next_report = now + args.report_every
                    s = q.stats()
                    sample = {"t": round(now - t0), "sent": len(ledger), "acked": s.acked,
                              "backlog": s.backlog, "in_flight": s.in_flight,
                              "redelivered": s.redelivered,
                              "steady_worker_rss_mib": round(rss_mib(steady.pid), 1),
                              "producer_rss_mib": round(rss_mib(os.getpid()), 1),
                              **storage_figure(url, store)}
                    samples.append(sample)
                    print(json.dumps(sample), flush=True)
        finally:
            producer.stop.set()
            producer.join(30)
        deadline = time.monotonic() + 120
        while unfinished(q) and time.monotonic() < deadline:
            time.sleep(0.5)
        drained_s = time.monotonic() - t0 - duration
        fleet.stop(60)
        fleet.kill_all()
        report = check_queue(ledger, store, q)
        stats = q.stats()

    lat = latencies(store, producer.sent_at)
    first = [d for at, d in lat if at - lat[0][0] <= window] if lat else []
    last = [d for at, d in lat if lat[-1][0] - at <= window] if lat else []
    first_rss = samples[0]["steady_worker_rss_mib"] if samples else None
    last_rss = samples[-1]["steady_worker_rss_mib"] if samples else None
    result = {
        "url": url.split("?")[0] if "@" not in url else url.split("@")[-1],
        "minutes": args.minutes, "rate": args.rate, "workers": args.workers,
        "restarts": fleet.started - args.workers, "drained_after_s": round(drained_s, 1),
        "producer_storage_errors": producer.errors,
        "redelivered": stats.redelivered, "late_acks": stats.late_acks,
        **report.summary(),
        "steady_worker_rss_mib": {"first": first_rss, "last": last_rss},
        "producer_rss_mib": {"first": samples[0]["producer_rss_mib"] if samples else None,
                             "last": samples[-1]["producer_rss_mib"] if samples else None},
        "storage": {"first": samples[0] if samples else None,
                    "last": storage_figure(url, store)},
        "latency_window_s": window,
        "latency_first_window": {"n": len(first), "p50": percentile(first, 50),
                                 "p99": percentile(first, 99)},
        "latency_last_window": {"n": len(last), "p50": percentile(last, 50),
                                "p99": percentile(last, 99)},
    }
    if url.startswith("sqlite:"):
        result["wal_mib_max"] = max((s.get("wal_mib", 0.0) for s in samples), default=0.0)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
