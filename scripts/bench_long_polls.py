"""Whether waiting long polls delay other receives of ``hailq serve``, on one machine.

    python scripts/bench_long_polls.py [--url sqlite:///bench.db] [--polls 1000]
                                       [--receives 500]

Starts ``hailq serve`` on a free port of 127.0.0.1 for a fresh database (or the
given one, whose queues ``lp_waiting`` and ``lp_busy`` it replaces), then measures
one ``wait=0`` receive of a message of ``lp_busy`` at a time, over one keep-alive
connection: first alone, then while ``--polls`` long polls (``wait=60``) wait on
``lp_waiting``. Prints p50, p99 and the largest of each, and the server's threads
while the polls wait (they hold none: ``hailq serve`` receives through
``hailq.aio``). Last, one message per poll
is sent to ``lp_waiting`` in one batch and the time until every poll has answered
is printed, with a check that each message went to exactly one poll.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

import hailq

TOKEN = "bench-token-for-long-polls"
WAITING, BUSY = "lp_waiting", "lp_busy"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _serve(url: str, port: int) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HAILQ_")}
    process = subprocess.Popen([sys.executable, "-m", "hailq.cli.main", "serve", "--url", url,
                                "--port", str(port), "--token", TOKEN], env=env, text=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
            return process
        except httpx.TransportError:
            if process.poll() is not None:
                said = process.stderr.read() if process.stderr else ""
                raise SystemExit(f"hailq serve ended: {said}") from None
            time.sleep(0.1)
    raise SystemExit("hailq serve did not answer within 60 s")


def _threads(pid: int) -> int:
    """How many threads process ``pid`` runs now (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    return -1


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, -(-int(q * 100) * len(ordered) // 100) - 1)]


def _receives(client: httpx.Client, n: int) -> list[float]:
    """Seconds each of ``n`` wait=0 receives of lp_busy took (each must get a message)."""
    took = []
    for _ in range(n):
        started = time.perf_counter()
        r = client.post(f"/api/queues/{BUSY}/receive", json={"wait": 0})
        took.append(time.perf_counter() - started)
        assert r.status_code == 200 and len(r.json()["messages"]) == 1, r.text
    return took


def _shown(label: str, took: list[float]) -> str:
    ms = [t * 1000 for t in took]
    return (f"{label}: p50 {statistics.median(ms):.1f} ms, p99 {_percentile(ms, 0.99):.1f} ms, "
            f"max {max(ms):.1f} ms ({len(ms)} receives)")


class Crowd:
    """``n`` long polls of lp_waiting in a thread with its own event loop, each on a
    connection of its own written by hand (an HTTP client's pool of hundreds of
    connections would itself add seconds to what is measured)."""

    def __init__(self, port: int, n: int) -> None:
        self.answered: list[tuple[float, list[str]]] = []
        self.thread = threading.Thread(target=asyncio.run, args=(self._run(port, n),),
                                       daemon=True)
        self.thread.start()

    async def _run(self, port: int, n: int) -> None:
        body = json.dumps({"wait": 60}).encode()
        head = (f"POST /api/queues/{WAITING}/receive HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()

        async def one() -> None:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(head + body)
            status = await reader.readline()
            assert b" 200 " in status, status
            length = 0
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            answer = json.loads(await reader.readexactly(length))
            self.answered.append((time.perf_counter(), [m["id"] for m in answer["messages"]]))
            writer.close()

        await asyncio.gather(*(one() for _ in range(n)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", help="database URL (default: a fresh SQLite file)")
    parser.add_argument("--polls", type=int, default=1000)
    parser.add_argument("--receives", type=int, default=500)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        url = args.url or f"sqlite:///{Path(folder) / 'bench.db'}"
        hailq.connect(url).close()  # a fresh database is made (and migrated) here
        port = _free_port()
        server = _serve(url, port)
        base = f"http://127.0.0.1:{port}"
        try:
            with httpx.Client(base_url=base, timeout=120,
                              headers={"Authorization": f"Bearer {TOKEN}"}) as c:
                for name in (WAITING, BUSY):
                    c.delete(f"/api/queues/{name}", params={"force": "true"})
                    c.put(f"/api/queues/{name}", json={}).raise_for_status()
                for _ in range(2):
                    c.post(f"/api/queues/{BUSY}/messages", json={"messages": [
                        {"body": i} for i in range(args.receives)]}).raise_for_status()
                _receives(c, 20)  # warm up the connection and the statements
                alone = _receives(c, args.receives - 20)
                print(_shown("wait=0 receive, no long polls", alone))
                threads = _threads(server.pid)
                crowd = Crowd(port, args.polls)
                # Every poll has arrived and made its first claim (a slow machine's
                # thousand first claims take a few seconds).
                time.sleep(max(3.0, args.polls / 100))
                print(f"server threads: {threads} before the polls, {_threads(server.pid)} "
                      f"while {args.polls} polls wait")
                crowd_took = _receives(c, args.receives)
                assert not crowd.answered, "a poll answered before any message was sent"
                print(_shown(f"wait=0 receive beside {args.polls} waiting long polls",
                             crowd_took))
                sent_at = time.perf_counter()
                ids = c.post(f"/api/queues/{WAITING}/messages", json={"messages": [
                    {"body": i} for i in range(args.polls)]}).json()["ids"]
                crowd.thread.join(120)
                got = sorted(i for _, batch in crowd.answered for i in batch)
                assert got == sorted(ids), "each message must go to exactly one poll"
                times = sorted((at - sent_at) * 1000 for at, _ in crowd.answered)
                print(f"{args.polls} messages sent in one batch, one to each poll: the first "
                      f"poll answered {times[0]:.0f} ms after the send began, half of them "
                      f"by {times[len(times) // 2]:.0f} ms, the last at {times[-1]:.0f} ms")
        finally:
            server.send_signal(signal.SIGINT)
            server.wait(30)


if __name__ == "__main__":
    main()
