"""Rule 29 at the connection: no body is read before authentication (none at all for
``/healthz`` and ``/login``), slow headers and slow bodies are cut off, many
connections posting large bodies cost no memory of those sizes, an ``Origin`` is
compared with its scheme and never believed twice, and a server others can reach
takes no short token. Real ``hailq serve`` processes and raw sockets, both backends."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import hailq
from hailq.errors import InvalidArgument
from hailq.serve import Tokens, create_app

from .conftest import ADMIN, Server, Start
from .test_security_cli import Serve

TOKEN = "a-token-of-twenty-six-chars"


@pytest.fixture
def serving(broker: hailq.Broker, url: str) -> Iterator[list[Serve]]:
    started: list[Serve] = []
    yield started
    for s in started:
        s.finish()


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=30)


def _head(raw: socket.socket) -> bytes:
    """The status line and headers of the answer (what arrives before the blank line)."""
    got = b""
    while b"\r\n\r\n" not in got:
        chunk = raw.recv(4096)
        if not chunk:
            break
        got += chunk
    return got


def _closed(raw: socket.socket, within: float) -> bool:
    """Whether the server closes the connection within ``within`` seconds."""
    raw.settimeout(within)
    try:
        while raw.recv(4096):
            pass
    except TimeoutError:
        return False
    except ConnectionResetError:
        pass
    return True


def _memory(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (the peak) of a process, in KiB."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            found[name] = int(value.split()[0])
    return found


def test_rule_29_healthz_and_login_never_read_a_body(start: Start,
                                                    broker: hailq.Broker) -> None:
    """Answered at once with the body still unsent, and the connection closed so that
    what comes after is not read either."""
    server = start(max_body=4 * 1024 * 1024)
    port = int(server.base.rsplit(":", 1)[1])
    for target, status in (("/healthz", b"200"), ("/login?token=guess", b"401"),
                           (f"/login?token={ADMIN}", b"303")):
        with _connect(port) as raw:
            raw.sendall(f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                        f"Content-Length: {4 * 1024 * 1024}\r\n\r\n".encode())
            head = _head(raw)  # no byte of the 4 MiB was sent, yet it answers
            assert head.split(b" ")[1] == status, head
            assert b"connection: close" in head.lower()
            assert _closed(raw, 10)


def test_rule_29_no_body_is_read_before_the_token_is_checked(start: Start,
                                                            broker: hailq.Broker) -> None:
    server = start(max_body=4 * 1024 * 1024)
    broker.queue("jobs")
    port = int(server.base.rsplit(":", 1)[1])
    for auth in ("", "Authorization: Bearer wrong\r\n"):
        with _connect(port) as raw:
            raw.sendall(f"POST /api/queues/jobs/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                        f"{auth}Content-Length: {3 * 1024 * 1024}\r\n\r\n".encode())
            head = _head(raw)
            assert head.startswith(b"HTTP/1.1 401 ") and b"connection: close" in head.lower()
    assert broker.get_queue("jobs").stats().sent == 0


def test_rule_29_a_body_that_does_not_arrive_in_time_is_408(start: Start,
                                                           broker: hailq.Broker) -> None:
    """Slow loris on the body: a few bytes, then nothing."""
    server = start(read_timeout=1)
    broker.queue("jobs")
    port = int(server.base.rsplit(":", 1)[1])
    with _connect(port) as raw:
        raw.sendall(f"POST /api/queues/jobs/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    f"Authorization: Bearer {ADMIN}\r\nContent-Type: application/json\r\n"
                    f"Content-Length: 100\r\n\r\n{{\"body\": ".encode())
        head = _head(raw)
        assert head.startswith(b"HTTP/1.1 408 "), head
        assert _closed(raw, 10)
    assert broker.get_queue("jobs").stats().sent == 0
    # A body that comes in time is as welcome as ever.
    ok = server.client().post("/api/queues/jobs/messages", json={"body": 1})
    assert ok.status_code == 200


def test_rule_29_slow_headers_and_slow_bodies_are_cut_off(serving: list[Serve],
                                                          url: str) -> None:
    """``hailq serve --read-timeout``: headers sent a byte at a time, each byte well
    within the keep-alive time, are cut off; so is a body that stops halfway."""
    s = Serve(url, "--read-timeout", "1", "--token", TOKEN)
    serving.append(s)
    s.wait_ready()
    with _connect(s.port) as raw:
        raw.settimeout(0.5)
        request = f"GET /api/queues HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: {'z' * 100}"
        cut = False
        for byte in request.encode():
            try:
                raw.sendall(bytes([byte]))
                if raw.recv(1) == b"":
                    cut = True
                    break
            except TimeoutError:
                continue
            except (BrokenPipeError, ConnectionResetError):
                cut = True
                break
        assert cut  # ~50 s of trickle were allowed for; the server ended it after 1 s
    with _connect(s.port) as raw:
        raw.sendall(f"PUT /api/queues/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    f"Authorization: Bearer {TOKEN}\r\nContent-Length: 50\r\n\r\n{{".encode())
        assert _head(raw).startswith(b"HTTP/1.1 408 ")
    # An ordinary client is served as before, on a kept-alive connection too.
    with httpx.Client(base_url=f"http://127.0.0.1:{s.port}",
                      headers={"Authorization": f"Bearer {TOKEN}"}) as c:
        assert c.put("/api/queues/jobs", json={}).status_code == 200
        assert c.get("/api/queues/jobs").status_code == 200
    s.finish()


def _post_large(port: int, head: str, size: int, sent: list[int]) -> None:
    """Send ``head`` and then ``size`` bytes of body, as much as the server takes."""
    block = b"x" * (256 * 1024)
    try:
        with _connect(port) as raw:
            raw.settimeout(10)
            raw.sendall(head.encode())
            done = 0
            while done < size:
                raw.sendall(block)
                done += len(block)
            sent.append(done)
            _head(raw)
    except OSError:  # refused and closed before it was all sent: as it should be
        sent.append(-1)


def test_rule_29_many_connections_posting_large_bodies_cost_no_memory(
        serving: list[Serve], url: str, broker: hailq.Broker) -> None:
    """40 connections each to /healthz, /login and an API route without a token, each
    posting 4 MiB: the server holds none of those bodies (480 MiB in all)."""
    broker.queue("jobs")
    size = 4 * 1024 * 1024
    s = Serve(url, "--max-body", str(size), "--token", TOKEN)
    serving.append(s)
    s.wait_ready()
    assert httpx.get(f"http://127.0.0.1:{s.port}/api/queues",
                     headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
    before = _memory(s.process.pid)
    heads = [f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {size}\r\n\r\n",
             f"GET /login?token=x HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {size}"
             "\r\n\r\n",
             f"POST /api/queues/jobs/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n"
             f"Content-Length: {size}\r\n\r\n"]
    sent: list[int] = []
    threads = [threading.Thread(target=_post_large, args=(s.port, head, size, sent))
               for head in heads for _ in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert len(sent) == 120
    after = _memory(s.process.pid)
    grown = after["VmHWM"] - before["VmRSS"]
    assert grown < 24 * 1024, (before, after)  # KiB: far below 480 MiB, or even one body
    assert broker.get_queue("jobs").stats().sent == 0
    assert httpx.get(f"http://127.0.0.1:{s.port}/healthz").status_code == 200


def test_rule_29_origin_is_compared_with_its_scheme(server: Server,
                                                    broker: hailq.Broker) -> None:
    """A plain-HTTP server is http://host:port, never https://host:port."""
    broker.queue("jobs")
    c = server.client()
    port = server.base.rsplit(":", 1)[1]
    for origin in (f"https://127.0.0.1:{port}", f"ws://127.0.0.1:{port}",
                   f"http://127.0.0.1:{int(port) + 1}", "http://127.0.0.1",
                   f"http://user@127.0.0.1:{port}", f"http://localhost:{port}",
                   f"http://127.0.0.1:{port}.evil.example", "null"):
        r = c.post("/api/queues/jobs/messages", json={"body": 1}, headers={"Origin": origin})
        assert r.status_code == 403, (origin, r.text)
        assert r.json()["error"]["code"] == "foreign_origin"
    cookie = server.client(None, cookies={"hailq_token": ADMIN})
    r = cookie.post("/api/queues/jobs/pause",
                    headers={"Referer": f"https://127.0.0.1:{port}/queues/jobs"})
    assert r.status_code == 403
    assert broker.get_queue("jobs").stats().sent == 0
    assert broker.get_queue("jobs").stats().paused is False
    own = f"http://127.0.0.1:{port}"
    assert c.post("/api/queues/jobs/messages", json={"body": 1},
                  headers={"Origin": own}).status_code == 200
    # Behind a TLS proxy on this host that says so, the page's origin is https.
    proxied = {"Origin": f"https://127.0.0.1:{port}", "X-Forwarded-Proto": "https"}
    assert c.post("/api/queues/jobs/messages", json={"body": 1},
                  headers=proxied).status_code == 200
    assert c.post("/api/queues/jobs/messages", json={"body": 1},
                  headers={"Origin": own.upper().replace("HTTP", "http")}).status_code == 200


def test_rule_29_two_origin_or_host_headers_are_refused(server: Server,
                                                        broker: hailq.Broker) -> None:
    broker.queue("jobs")
    own = server.base
    c = server.client()
    for pair in ((own, "http://evil.example"), ("http://evil.example", own), (own, own)):
        r = c.post("/api/queues/jobs/messages", json={"body": 1},
                   headers=[("Origin", pair[0]), ("Origin", pair[1])])
        assert r.status_code == 403, pair
        assert r.json()["error"]["code"] == "foreign_origin"
    port = int(own.rsplit(":", 1)[1])
    with _connect(port) as raw:
        raw.sendall(f"POST /api/queues/jobs/pause HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    f"Host: evil.example\r\nAuthorization: Bearer {ADMIN}\r\n"
                    "Content-Length: 0\r\n\r\n".encode())
        assert _head(raw).split(b" ")[1] in (b"400", b"403")
    assert broker.get_queue("jobs").stats().sent == 0
    assert broker.get_queue("jobs").stats().paused is False


def test_rule_29_a_server_others_reach_takes_no_short_token(broker: hailq.Broker) -> None:
    for tokens in (Tokens(("x",)), Tokens(("a" * 15,)), Tokens((TOKEN,), ("short",)),
                   Tokens((), (), ("fifteen-chars-x",))):
        with pytest.raises(InvalidArgument, match="fewer than 16 characters"):
            create_app(broker, tokens=tokens, host="0.0.0.0")
    create_app(broker, tokens=Tokens(("a" * 16,)), host="0.0.0.0")
    create_app(broker, tokens=Tokens(("x",)), host="127.0.0.1")  # loopback: the user's


@pytest.mark.parametrize("args, env", [
    (["--token", "x"], {}),
    (["--token", "fifteen-chars-x"], {}),
    (["--token", TOKEN], {"HAILQ_SERVE_READ_TOKEN": "reader"}),
    ([], {"HAILQ_SERVE_CLIENT_TOKEN": f"{TOKEN},short"}),
])
def test_rule_29_serve_refuses_a_short_token_off_loopback(url: str, args: list[str],
                                                          env: dict[str, str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "hailq.cli.main", "serve", "--url", url, "--host", "0.0.0.0",
         "--port", "0", *args], capture_output=True, text=True, timeout=60,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("HAILQ_")}, **env})
    assert done.returncode == 2, done
    assert "fewer than 16 characters" in done.stderr
    assert "openssl rand" in done.stderr
