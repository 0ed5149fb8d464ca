"""SPEC rule 2: ``send_many`` is all or none, even when the producer is SIGKILLed mid-batch.

The producer is a process of its own. The test waits until its batch
transaction is really open in the database (SQLite: the file's write lock is
held; PostgreSQL: its session holds a transaction id), waits a little more,
and SIGKILLs it. Afterwards the queue holds none of the batch or all of it, the
SQLite file is intact, the queue still works, and a batch whose transaction
died left no dedup ids behind (a resend enqueues it in full).
"""

from __future__ import annotations

import random
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import hailq

from .conftest import Figure
from .ledger import sqlite_integrity
from .pgserver import PgServer
from .producer import batch
from .workers import SRC

HERE = Path(__file__).resolve().parent
# Big enough that the transaction lasts about a second here (dedup ids cost one
# statement each, a round trip on PostgreSQL).
SIZES = {("sqlite", "plain"): 5000, ("sqlite", "dedup"): 5000,
         ("postgres", "plain"): 5000, ("postgres", "dedup"): 2000}


@pytest.fixture(params=["sqlite", "postgres"])
def kill_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A private database: the PostgreSQL check looks at every session of the server."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'hailq.db'}"
        return
    server: PgServer = request.getfixturevalue("throwaway_pg")
    schema = f"kill_{uuid.uuid4().hex[:8]}"
    yield server.hailq_url(schema)
    server.psql(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _transaction_open(url: str) -> bool:
    if url.startswith("sqlite:"):
        conn = sqlite3.connect(url[len("sqlite:///"):], timeout=0, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("ROLLBACK")
            return False
        except sqlite3.OperationalError as exc:
            assert "locked" in str(exc) or "busy" in str(exc), exc
            return True
        finally:
            conn.close()
    import psycopg

    with psycopg.connect(url.split("?")[0], autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE backend_xid IS NOT NULL "
            "AND pid <> pg_backend_pid() AND datname = current_database()").fetchone()
        return bool(row and row[0])


def _kill_mid_batch(url: str, queue: str, n: int, kind: str, extra: float) -> tuple[bool, str]:
    """Start a producer, SIGKILL it ``extra`` s after its transaction opened.

    Returns whether the kill landed inside the transaction, and the producer's output.
    """
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "producer.py"), url, queue, str(n), kind],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"})
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready", proc.stderr.read() if proc.stderr else ""
    deadline = time.monotonic() + 60
    inside = False
    while time.monotonic() < deadline and proc.poll() is None:
        if _transaction_open(url):
            inside = True
            break
        time.sleep(0.002)
    time.sleep(extra)
    still_running = proc.poll() is None
    proc.send_signal(signal.SIGKILL)
    out, _ = proc.communicate(timeout=30)
    # A PostgreSQL server finishes (and commits) a statement whose client died only
    # when it notices; count after the killed session is gone.
    deadline = time.monotonic() + 60
    while _transaction_open(url) and time.monotonic() < deadline:
        time.sleep(0.05)
    return inside and still_running, out


@pytest.mark.parametrize("kind", ["plain", "dedup"])
def test_producer_killed_mid_send_many_leaves_all_or_nothing(
        kill_url: str, kind: str, figure: Figure) -> None:
    n = SIZES[("sqlite" if kill_url.startswith("sqlite:") else "postgres", kind)]
    rng = random.Random(n)
    outcomes: list[int] = []
    with hailq.connect(kill_url) as broker:
        for trial in range(2):
            queue = f"kill-{kind}-{trial}"
            broker.queue(queue)
            # The first kill comes the moment the transaction is seen open, later ones
            # somewhat after (possibly after the commit: then the batch is all there).
            extra = 0.0 if trial == 0 else rng.uniform(0, 0.3)
            inside, out = _kill_mid_batch(kill_url, queue, n, kind, extra)
            q = broker.get_queue(queue)
            present = q.stats().ready
            assert present in (0, n), f"trial {trial}: {present} of {n} messages present"
            assert len(q.peek(limit=100_000)) == present
            if "done" in out:
                assert present == n, "send_many returned but the batch is not all there"
            if inside and present == 0 and kind == "dedup":
                # The rolled-back transaction took its dedup ids with it.
                ids = q.send_many(batch(n, kind))
                assert len(set(ids)) == n and q.stats().ready == n
            outcomes.append(present if inside else -1)
        # The database still works after the kills.
        q = broker.queue("after-kill")
        q.send({"n": 1})
        [m] = q.receive()
        m.ack()
    figure(backend=kill_url.split(":")[0], kind=kind, batch=n,
           outcomes=["none" if o == 0 else "all" if o == n else "kill missed" for o in outcomes])
    # At least one kill landed inside an open transaction; none left a partial batch.
    assert any(o >= 0 for o in outcomes), "no kill landed inside the batch's transaction"
    if kill_url.startswith("sqlite:"):
        assert 0 in outcomes, "a kill inside the transaction must leave nothing"
        assert sqlite_integrity(kill_url[len("sqlite:///"):]) == "ok"
