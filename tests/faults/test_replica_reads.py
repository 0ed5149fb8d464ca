"""Monitoring from a read replica (docs/guides/scaling.md): the looks of rule 30 run on
a hot standby, so the dashboard and the figures can leave the primary to the workers.

A primary and a streaming standby of the test's own (``pgcluster.py``); messages sent
on the primary are seen, by the standby's replay, in ``hailq queues``, ``hailq stats``,
``hailq metrics``, ``hailq peek`` and the dashboard's API of a ``hailq serve`` that
only knows the standby. Nothing is written there (a hot standby refuses every write).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import hailq

from .pgcluster import PgCluster, start_cluster
from .pgserver import free_port

# A long scenario with servers of its own: CI runs it after make test (.ci/run's fault
# stage), make test-faults always.
pytestmark = pytest.mark.slow

HAILQ = str(Path(sys.executable).with_name("hailq"))
TOKEN = "replica-reads-admin-token"


@pytest.fixture
def replica() -> Iterator[PgCluster]:
    # Not under pytest's tmp dir: that is private to root, and the servers run as postgres.
    made = start_cluster(Path(tempfile.mkdtemp(prefix="hailq-replica-")), sync=True)
    try:
        yield made
    finally:
        made.destroy()


def _cli(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([HAILQ, *args], env=dict(os.environ, HAILQ_URL=url),
                          capture_output=True, text=True, timeout=120)


def test_monitoring_and_the_dashboard_read_from_a_hot_standby(replica: PgCluster) -> None:
    replica.wait_streaming()
    with hailq.connect(replica.hailq_url("claims")) as broker:
        q = broker.queue("claims")
        q.send_many([{"claim": n} for n in range(5)])
        assert len(q.receive()) == 1  # one in flight
    standby = f"postgresql://postgres@127.0.0.1:{replica.standby.port}/hailq?schema=claims"
    assert replica.standby.psql("SELECT pg_is_in_recovery()", db="postgres") == [(True,)]
    _wait_replayed(replica)  # the lease commits without waiting for the standby

    stats = _cli(standby, "stats", "claims", "--json")
    assert stats.returncode == 0, stats.stderr
    [figures] = json.loads(stats.stdout)["queues"]
    assert (figures["ready"], figures["in_flight"]) == (4, 1), figures
    for look in (("queues",), ("metrics",), ("peek", "claims")):
        done = _cli(standby, *look)
        assert done.returncode == 0, (look, done.stderr)
    assert 'hailq_queue_messages{queue="claims",state="ready"} 4.0' in _cli(
        standby, "metrics").stdout

    port = free_port()
    serve = subprocess.Popen([HAILQ, "serve", "--port", str(port), "--token", TOKEN],
                             env=dict(os.environ, HAILQ_URL=standby),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        deadline = time.monotonic() + 60
        while True:
            try:
                api = httpx.get(f"http://127.0.0.1:{port}/api/queues/claims", headers=headers,
                                timeout=10)
                break
            except httpx.TransportError:
                assert serve.poll() is None and time.monotonic() < deadline, (
                    serve.stdout and serve.stdout.read())
                time.sleep(0.2)
        assert api.status_code == 200, api.text
        shown = api.json()["figures"]
        assert (shown["ready"], shown["in_flight"]) == (4, 1), shown
        page = httpx.get(f"http://127.0.0.1:{port}/queues/claims", headers=headers, timeout=10)
        assert page.status_code == 200 and "claims" in page.text
    finally:
        serve.terminate()
        serve.wait(30)


def _wait_replayed(c: PgCluster, timeout: float = 60) -> None:
    """Until the standby has replayed everything the primary wrote so far."""
    [(lsn,)] = c.primary.psql("SELECT pg_current_wal_lsn()::text", db="postgres")
    deadline = time.monotonic() + timeout
    while not c.standby.psql(f"SELECT pg_last_wal_replay_lsn() >= '{lsn}'::pg_lsn",
                             db="postgres")[0][0]:
        assert time.monotonic() < deadline, "the standby did not catch up"
        time.sleep(0.05)
