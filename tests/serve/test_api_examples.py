"""The examples in another language (examples/http/) send and receive through a server
the test starts, on SQLite and PostgreSQL: the curl script, and the Node client."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

import hailq
from needs import unavailable

from .conftest import ADMIN, CLIENT, Server

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "http"


def _run(command: list[str], server: Server, token: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HAILQ_API": server.base, "HAILQ_TOKEN": token}
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120,
                          check=False)


def test_curl_script_sends_and_receives(server: Server, broker: hailq.Broker) -> None:
    if shutil.which("curl") is None:
        pytest.fail("curl is needed for the shell example (apt-get install curl)")
    done = _run(["sh", str(EXAMPLES / "send_and_receive.sh"), "emails"], server, ADMIN)
    assert done.returncode == 0, done.stderr
    assert '"ids":' in done.stdout and '"acked":true' in done.stdout
    stats = broker.get_queue("emails").stats()
    assert stats.sent == 3 and stats.acked == 3 and stats.backlog == 0
    # With a client token the queue must exist; the declaration is refused, the rest works.
    done = _run(["sh", str(EXAMPLES / "send_and_receive.sh"), "emails"], server, CLIENT)
    assert done.returncode == 0, done.stderr
    stats = broker.get_queue("emails").stats()
    assert stats.sent == 5 and stats.acked == 5  # the batch's dedup id is seen again


def test_node_client_sends_and_receives(server: Server, broker: hailq.Broker) -> None:
    node = shutil.which("node")
    if node is None:
        unavailable("node is not installed: the Node example (examples/http/client.mjs) "
                    "was not run", "the Node example (Debian's nodejs)")
    broker.queue("emails")
    done = _run([node, str(EXAMPLES / "client.mjs"), "emails"], server, CLIENT)
    assert done.returncode == 0, done.stderr
    assert "received" in done.stdout and "hello from node" in done.stdout
    assert "acked 2" in done.stdout
    stats = broker.get_queue("emails").stats()
    assert stats.sent == 2 and stats.acked == 2
