"""Rule 29 as ``hailq serve`` starts: loopback by default, no other address without a
token, a random admin token and a login link otherwise, tokens from the environment,
TLS, and a redacted database URL. Real ``hailq serve`` processes, both backends."""

from __future__ import annotations

import os
import re
import shutil
import signal
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import hailq
from needs import unavailable
from waiting import wait_for

from .conftest import free_port


class Serve:
    """A ``hailq serve`` process and what it printed."""

    def __init__(self, url: str, *args: str, env: dict[str, str] | None = None) -> None:
        environment = {k: v for k, v in os.environ.items() if not k.startswith("HAILQ_")}
        environment.update(env or {})
        self.port = free_port()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "hailq.cli.main", "serve", "--url", url,
             "--port", str(self.port), *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment)

    def wait_ready(self, scheme: str = "http") -> None:
        def answers() -> bool:
            if self.process.poll() is not None:
                raise AssertionError(f"hailq serve ended: {self.finish()}")
            try:
                httpx.get(f"{scheme}://127.0.0.1:{self.port}/healthz", verify=False, timeout=5)
            except httpx.TransportError:
                return False
            return True

        wait_for(answers, timeout=60, what="hailq serve to answer")

    def finish(self) -> tuple[str, str]:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
        out, err = self.process.communicate(timeout=30)
        return out, err


@pytest.fixture
def serving(broker: hailq.Broker, url: str) -> Iterator[list[Serve]]:
    started: list[Serve] = []
    yield started
    for s in started:
        s.finish()


def test_rule_29_refuses_to_start_on_another_address_without_a_token(
        broker: hailq.Broker, url: str) -> None:
    for host in ("0.0.0.0", "::", "192.0.2.10"):
        s = Serve(url, "--host", host)
        code = s.process.wait(60)
        out, err = s.finish()
        assert code == 2, (host, out, err)
        assert "without a token" in err and "Traceback" not in err
        assert out == ""


def test_rule_29_another_address_with_a_token_starts(serving: list[Serve], url: str) -> None:
    s = Serve(url, "--host", "0.0.0.0", "--token", "t0ken-for-all-interfaces")
    serving.append(s)
    s.wait_ready()
    base = f"http://127.0.0.1:{s.port}"
    assert httpx.get(f"{base}/api/queues").status_code == 401
    r = httpx.get(f"{base}/api/queues",
                  headers={"Authorization": "Bearer t0ken-for-all-interfaces"})
    assert r.status_code == 200
    out, _ = s.finish()
    assert "login?token" not in out  # its token is the operator's, never printed


def test_rule_29_another_address_with_only_a_client_token_starts_without_admin(
        serving: list[Serve], url: str, broker: hailq.Broker) -> None:
    broker.queue("jobs")
    s = Serve(url, "--host", "0.0.0.0", env={"HAILQ_SERVE_CLIENT_TOKEN": "producer-token-of-19"})
    serving.append(s)
    s.wait_ready()
    base = f"http://127.0.0.1:{s.port}"
    auth = {"Authorization": "Bearer producer-token-of-19"}
    assert httpx.post(f"{base}/api/queues/jobs/messages", json={"body": 1},
                      headers=auth).status_code == 200
    assert httpx.post(f"{base}/api/queues/jobs/purge", headers=auth).status_code == 403
    out, _ = s.finish()
    assert "login?token" not in out  # no admin token is made off loopback
    assert broker.get_queue("jobs").stats().ready == 1


def test_rule_29_loopback_without_token_makes_one_and_prints_a_login_link(
        serving: list[Serve], url: str, broker: hailq.Broker) -> None:
    broker.queue("jobs")
    s = Serve(url)
    serving.append(s)
    s.wait_ready()
    line = s.process.stdout.readline() if s.process.stdout else ""
    while "login?token=" not in line and line:
        line = s.process.stdout.readline() if s.process.stdout else ""
    found = re.search(r"(http://127\.0\.0\.1:\d+)/login\?token=(\S+)", line)
    assert found, line
    base, token = found.group(1), found.group(2)
    assert len(token) >= 32
    with httpx.Client(base_url=base, timeout=30) as browser:
        assert browser.get("/api/queues").status_code == 401
        r = browser.get(f"/login?token={token}")
        assert r.status_code == 303
        assert browser.get("/api/queues").json()["queues"][0]["name"] == "jobs"
        r = browser.post("/api/queues/jobs/pause", headers={"Origin": base})
        assert r.status_code == 200
    assert broker.get_queue("jobs").stats().paused
    # A second run makes another token: the first no longer opens anything there.
    other = Serve(url)
    serving.append(other)
    other.wait_ready()
    r = httpx.get(f"http://127.0.0.1:{other.port}/api/queues",
                  headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 401


def test_rule_29_tokens_from_the_environment_with_roles(serving: list[Serve], url: str,
                                                        broker: hailq.Broker) -> None:
    broker.queue("jobs")
    s = Serve(url, env={"HAILQ_SERVE_TOKEN": "env-admin",
                        "HAILQ_SERVE_READ_TOKEN": "env-read-1,env-read-2",
                        "HAILQ_SERVE_CLIENT_TOKEN": "env-client"})
    serving.append(s)
    s.wait_ready()
    base = f"http://127.0.0.1:{s.port}"

    def call(token: str, method: str, path: str, **kw: object) -> int:
        return httpx.request(method, base + path, headers={"Authorization": f"Bearer {token}"},
                             **kw).status_code  # type: ignore[arg-type]

    assert call("env-read-2", "GET", "/api/queues") == 200
    assert call("env-read-1", "POST", "/api/queues/jobs/messages", json={"body": 1}) == 403
    assert call("env-client", "POST", "/api/queues/jobs/messages", json={"body": 1}) == 200
    assert call("env-client", "POST", "/api/queues/jobs/purge") == 403
    assert call("env-admin", "POST", "/api/queues/jobs/purge") == 200
    out, err = s.finish()
    assert "login?token" not in out and "env-admin" not in out + err


def test_rule_29_database_password_is_redacted_in_what_serve_prints(
        serving: list[Serve], pg_url: str) -> None:
    hailq.connect(pg_url).close()
    secret = "s3cret-Passw0rd"
    s = Serve(pg_url.replace("postgres@", f"postgres:{secret}@", 1))
    serving.append(s)
    s.wait_ready()
    out, err = s.finish()
    assert "***@" in err, err
    assert secret not in out + err


def test_rule_29_serves_https_with_a_certificate(serving: list[Serve], url: str,
                                                tmp_path: Path) -> None:
    if shutil.which("openssl") is None:
        unavailable("openssl is needed to make a test certificate", "the HTTPS test")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=120)
    s = Serve(url, "--token", "tls-token", "--certfile", str(cert), "--keyfile", str(key))
    serving.append(s)
    s.wait_ready("https")
    base = f"https://127.0.0.1:{s.port}"
    trust = ssl.create_default_context(cafile=str(cert))
    r = httpx.get(f"{base}/api/queues", headers={"Authorization": "Bearer tls-token"},
                  verify=trust)
    assert r.status_code == 200
    login = httpx.get(f"{base}/login?token=tls-token", verify=trust)
    assert "secure" in login.headers["set-cookie"].lower()
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://127.0.0.1:{s.port}/healthz", timeout=5)
