"""What the HTTP API costs over the Python API, on one machine, in the same run.

    python scripts/bench_http.py [--url sqlite:///bench.db] [--cycles 300] [--runs 3]

Starts ``hailq serve`` on a free port of 127.0.0.1 for a fresh database and measures,
as medians of ``--runs`` runs: one message sent, received and acked (three requests
over one keep-alive connection) against the same cycle through the Python API; and
messages per second in batches of 100 (one send, one receive, one ack request per
batch) against the same batches in Python.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

import hailq

TOKEN = "bench-token"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _python_cycle(queue: hailq.Queue, cycles: int) -> float:
    started = time.perf_counter()
    for n in range(cycles):
        queue.send({"n": n})
        [m] = queue.receive()
        m.ack()
    return (time.perf_counter() - started) / cycles


def _http_cycle(c: httpx.Client, cycles: int) -> float:
    started = time.perf_counter()
    for n in range(cycles):
        c.post("/api/queues/bench/messages", json={"body": {"n": n}}).raise_for_status()
        [m] = c.post("/api/queues/bench/receive", json={}).json()["messages"]
        c.post("/api/queues/bench/ack", json={"receipts": [m["receipt"]]}).raise_for_status()
    return (time.perf_counter() - started) / cycles


def _python_batches(queue: hailq.Queue, batches: int) -> float:
    started = time.perf_counter()
    for _ in range(batches):
        queue.send_many([{"n": n} for n in range(100)])
        got = queue.receive(100)
        queue.ack_many(got)
    return batches * 100 / (time.perf_counter() - started)


def _http_batches(c: httpx.Client, batches: int) -> float:
    started = time.perf_counter()
    for _ in range(batches):
        c.post("/api/queues/bench/messages",
               json={"messages": [{"body": {"n": n}} for n in range(100)]}).raise_for_status()
        got = c.post("/api/queues/bench/receive", json={"max_messages": 100}).json()
        c.post("/api/queues/bench/ack",
               json={"receipts": [m["receipt"] for m in got["messages"]]}).raise_for_status()
    return batches * 100 / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="a database to use (default: a new SQLite file)")
    parser.add_argument("--cycles", type=int, default=300)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="hailq-bench-http-"))
    url = args.url or f"sqlite:///{workdir / 'bench.db'}"
    broker = hailq.connect(url)
    queue = broker.queue("bench")
    queue.purge()
    port = _free_port()
    env = {**os.environ, "HAILQ_SERVE_TOKEN": TOKEN}
    server = subprocess.Popen([sys.executable, "-m", "hailq.cli.main", "serve", "--url", url,
                               "--port", str(port)], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60,
                          headers={"Authorization": f"Bearer {TOKEN}"}) as c:
            deadline = time.monotonic() + 60
            while True:
                try:
                    c.get("/healthz")
                    break
                except httpx.TransportError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
            _http_cycle(c, 20)  # warm both up
            _python_cycle(queue, 20)
            py, http, py_b, http_b = [], [], [], []
            for _ in range(args.runs):
                py.append(_python_cycle(queue, args.cycles))
                http.append(_http_cycle(c, args.cycles))
                py_b.append(_python_batches(queue, args.cycles // 10))
                http_b.append(_http_batches(c, args.cycles // 10))
    finally:
        server.terminate()
        server.wait(30)
        broker.close()
    p, h = statistics.median(py), statistics.median(http)
    pb, hb = statistics.median(py_b), statistics.median(http_b)
    print(f"backend: {broker.url}")
    print(f"one message send+receive+ack: Python {p * 1000:.2f} ms, HTTP {h * 1000:.2f} ms "
          f"(HTTP/Python {h / p:.1f}x)")
    print(f"batches of 100: Python {pb:,.0f} msg/s, HTTP {hb:,.0f} msg/s "
          f"(HTTP/Python {hb / pb:.2f})")


if __name__ == "__main__":
    main()
