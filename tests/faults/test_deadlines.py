"""SPEC rule 31 on a real server: no call waits for ever.

Two servers that never answer, made without replication on the suite's
throwaway server (``throwaway_pg``), never the shared one:

- **commits that hang**: ``synchronous_standby_names = 'nobody'`` makes every
  synchronous commit wait for a standby that never comes, as a promoted
  standby does that still lists the one it had. ``statement_timeout`` cannot
  end that wait (the commit is already local); hailq's deadline must. Sends
  commit synchronously and must fail in time, saying the message may have been
  stored; leases and acks commit with ``synchronous_commit = off`` and go on.
- **a stopped server**: the postmaster and its backends stopped (SIGSTOP)
  keep every connection open and the kernel still acknowledges every packet,
  so only hailq's deadline and libpq's ``connect_timeout`` end a call.

And on SQLite, whose "server" is the file: a process frozen with the write lock
held makes writes fail within ``busy_timeout``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

import hailq

from .conftest import Figure
from .pgserver import PgServer

# A long scenario with servers of its own: CI runs it after make test (.ci/run's fault
# stage), make test-faults always.
pytestmark = pytest.mark.slow

TIMEOUT = 3  # seconds: the URL's timeout option
SLACK = 1.5  # seconds past it that a failing call may take to come back


@pytest.fixture
def pg(throwaway_pg: PgServer) -> Iterator[PgServer]:
    yield throwaway_pg
    throwaway_pg.wait_ready(60)


@pytest.fixture
def url(pg: PgServer) -> Iterator[str]:
    schema = f"dl_{uuid.uuid4().hex[:8]}"
    yield pg.hailq_url(schema, timeout=TIMEOUT)
    pg.wait_ready(60)
    pg.psql(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@contextlib.contextmanager
def commits_hang(pg: PgServer) -> Iterator[None]:
    """Every synchronous commit waits for a standby named ``nobody``, until the end."""
    pg.psql("ALTER SYSTEM SET synchronous_standby_names = 'nobody'")
    pg.psql("SELECT pg_reload_conf()")
    time.sleep(0.3)  # the backends read the new setting at their next command
    try:
        yield
    finally:
        pg.psql("ALTER SYSTEM RESET synchronous_standby_names")
        pg.psql("SELECT pg_reload_conf()")  # releases every commit still waiting
        time.sleep(0.3)


def _server_pids(pg: PgServer) -> list[int]:
    postmaster = int((pg.data / "postmaster.pid").read_text().split()[0])
    children = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                stat = open(f"/proc/{entry}/stat").read()  # noqa: SIM115
                if int(stat.rsplit(")", 1)[1].split()[1]) == postmaster:
                    children.append(int(entry))
    return [postmaster, *children]


@contextlib.contextmanager
def stopped(pg: PgServer) -> Iterator[None]:
    """The postmaster and every backend stopped (SIGSTOP), connections left open."""
    pids = _server_pids(pg)
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)


def _fails_in_time(call: Callable[[], object], within: float = TIMEOUT + SLACK,
                   ) -> tuple[hailq.StorageError, float]:
    t0 = time.monotonic()
    with pytest.raises(hailq.StorageError) as caught:
        call()
    took = time.monotonic() - t0
    assert took < within, f"{took:.2f} s: {caught.value}"
    assert not isinstance(caught.value, psycopg.Error)
    return caught.value, took


def test_rule_31_a_send_whose_commit_never_returns_fails_in_time_and_says_it_may_be_stored(
        pg: PgServer, url: str, figure: Figure) -> None:
    with hailq.connect(url) as broker:
        q = broker.queue("claims", lease=30)
        q.send({"claim": 0})
        with commits_hang(pg):
            error, took = _fails_in_time(lambda: q.send({"claim": 1}, dedup_id="claim-1"))
            text = str(error)
            assert f"no answer within {TIMEOUT} s" in text, text
            assert "may have been stored" in text and "same dedup_id" in text, text
            assert f"127.0.0.1:{pg.port}" in text
            # Leases and acks do not wait for the standby: consumers go on meanwhile.
            t0 = time.monotonic()
            [m] = q.receive()
            m.ack()
            consumer_s = time.monotonic() - t0
            assert consumer_s < 1.0, consumer_s
            # The hung commit is local already: nobody sees it until the wait ends.
            assert q.stats().ready == 0
        # The wait ended (the setting is gone): the first try's commit is visible now,
        # and the retry the error advised stores nothing twice.
        again = q.send({"claim": 1}, dedup_id="claim-1")
        stored = q.receive(max_messages=10)
        figure(send_error_after_s=round(took, 2), consumer_during_hang_s=round(consumer_s, 3),
               stored_after_retry=len(stored))
    assert [m.id for m in stored] == [again]
    assert stored[0].body == {"claim": 1}


def test_rule_31_send_many_and_publish_fail_in_time_while_commits_hang(
        pg: PgServer, url: str) -> None:
    with hailq.connect(url) as broker:
        q = broker.queue("claims")
        topic = broker.topic("claims-topic")
        topic.subscribe("claims-sub")
        with commits_hang(pg):
            for call in (lambda: q.send_many([{"n": 1}, {"n": 2}]),
                         lambda: topic.publish({"n": 3})):
                error, _ = _fails_in_time(call)
                assert "may have been stored" in str(error)


def test_rule_31_a_stopped_server_gives_storage_errors_in_time_and_works_after(
        pg: PgServer, url: str, figure: Figure) -> None:
    with hailq.connect(url) as broker:
        q = broker.queue("claims", lease=30)
        q.send({"claim": 0})
        [held] = q.receive()
        took: dict[str, float] = {}
        with stopped(pg):
            for name, call in [
                    ("send", lambda: q.send({"claim": 1}, dedup_id="claim-1")),
                    ("receive", q.receive), ("long poll", lambda: q.receive(wait=10)),
                    ("ack", held.ack), ("stats", q.stats),
                    ("connect", lambda: hailq.connect(url).close())]:
                error, took[name] = _fails_in_time(call)
                if name == "send":
                    assert "may have been stored" in str(error)
        q.send({"claim": 1}, dedup_id="claim-1")  # the retry, once the server runs again
        with contextlib.suppress(hailq.LeaseLost):
            held.ack()
        ready = [m.body for m in q.receive(max_messages=10)]
    figure(**{f"{k.replace(' ', '_')}_error_after_s": round(v, 2) for k, v in took.items()})
    assert ready == [{"claim": 1}]


HOLDER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")  # the write lock, never released
print("held", flush=True)
time.sleep(3600)
"""


def test_rule_31_sqlite_a_write_lock_that_is_never_released_fails_writes_in_time(
        tmp_path: Path) -> None:
    """SQLite's "server" is the file: a process that takes its write lock and then
    hangs (stopped, or a transaction left open) must not make any call wait for ever.
    Writes fail within ``busy_timeout`` with a StorageError naming the file and the
    cause, and store nothing; reads go on (WAL); once the holder is gone, all works."""
    path = tmp_path / "claims.db"
    with hailq.connect(f"sqlite:///{path}?busy_timeout={TIMEOUT}") as broker:
        q = broker.queue("claims", lease=30)
        first = q.send({"claim": 0})
        holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)],
                                  stdout=subprocess.PIPE, text=True)
        try:
            assert holder.stdout is not None and holder.stdout.readline() == "held\n"
            os.kill(holder.pid, signal.SIGSTOP)  # frozen with the lock held
            calls: list[tuple[str, Callable[[], object]]] = [
                ("send", lambda: q.send({"claim": 1}, dedup_id="claim-1")),
                ("send_many", lambda: q.send_many([{"claim": 2}, {"claim": 3}])),
                ("receive", lambda: q.receive()),
            ]
            for name, call in calls:
                t0 = time.monotonic()
                with pytest.raises(hailq.StorageError) as caught:
                    call()
                took = time.monotonic() - t0
                assert took < TIMEOUT + SLACK, (name, took)
                text = str(caught.value)
                assert str(path) in text and "still busy" in text, (name, text)
            assert q.stats().ready == 1  # a read is not held up, and nothing was stored
        finally:
            holder.kill()
            holder.wait(10)
        again = q.send({"claim": 1}, dedup_id="claim-1")
        got = q.receive(max_messages=10)
    assert [m.id for m in got] == [first, again]
    assert [m.body for m in got] == [{"claim": 0}, {"claim": 1}]
