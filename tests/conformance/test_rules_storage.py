"""SPEC rule 28: contention, fork safety, read-only files and killed sessions.

PostgreSQL server restarts are tested by a separate suite; here the PostgreSQL
backend only has to survive its sessions being killed.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import sqlite3
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import hailq
from hailq import StorageError

from .helpers import RawDatabase, connect_fresh_and_send, hammer, receive_all

# -- contention ---------------------------------------------------------------------------------


def test_rule_28_threads_hammering_one_database_never_see_database_is_locked(
        broker: hailq.Broker) -> None:
    q = broker.queue("claims", lease=300)
    errors: list[BaseException] = []
    acked: list[int] = []
    lock = threading.Lock()

    def work(worker: int) -> None:
        try:
            for n in range(60):
                q.send({"n": worker * 1000 + n})
                for m in q.receive(max_messages=2):
                    m.ack()
                    with lock:
                        acked.append(m.body["n"])
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    for m in receive_all(q):
        m.ack()
        acked.append(m.body["n"])

    assert [f"{type(e).__name__}: {e}" for e in errors] == []
    assert sorted(acked) == sorted(w * 1000 + n for w in range(8) for n in range(60))
    assert q.stats().acked == 480


def test_rule_28_processes_hammering_one_database_never_see_database_is_locked(
        broker: hailq.Broker, url: str, tmp_path: Path) -> None:
    broker.queue("claims", lease=300)
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    outs = [tmp_path / f"hammer-{i}.json" for i in range(4)]
    workers = [ctx.Process(target=hammer, args=(url, "claims", i, 100, start, str(out)))
               for i, out in enumerate(outs)]

    for p in workers:
        p.start()
    start.set()
    for p in workers:
        p.join(120)

    assert [p.exitcode for p in workers] == [0, 0, 0, 0]
    reports = [json.loads(out.read_text()) for out in outs]
    assert [r["errors"] for r in reports] == [[], [], [], []]
    q = broker.get_queue("claims")
    rest = [m.body["worker"] * 1_000_000 + m.body["n"] for m in receive_all(q)]
    everything = sorted([n for r in reports for n in r["acked"]] + rest)
    assert everything == sorted(w * 1_000_000 + n for w in range(4) for n in range(100))
    assert q.stats().sent == 400


def test_rule_28_processes_opening_a_new_database_at_the_same_moment(
        url: str, tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    outs = [tmp_path / f"opener-{i}.json" for i in range(4)]
    openers = [ctx.Process(target=connect_fresh_and_send, args=(url, i, start, str(out)))
               for i, out in enumerate(outs)]

    for p in openers:
        p.start()
    start.set()
    for p in openers:
        p.join(120)

    assert [p.exitcode for p in openers] == [0, 0, 0, 0]
    assert [json.loads(out.read_text()) for out in outs] == [[], [], [], []]
    with hailq.connect(url) as broker:
        assert broker.get_queue("claims").stats().sent == 80


# -- fork ------------------------------------------------------------------------------------------


def test_rule_28_a_forked_child_opens_its_own_connection(broker: hailq.Broker,
                                                         raw: RawDatabase, tmp_path: Path) -> None:
    q = broker.queue("claims", lease=300)
    q.send_many(range(10))
    held = q.receive(max_messages=5)  # the parent has used its connection
    child_log = tmp_path / "child.json"

    def child() -> None:
        acked = []
        try:
            for n in range(100, 200):
                q.send(n)
                for m in q.receive():
                    m.ack()
                    acked.append(m.body)
            child_log.write_text(json.dumps(acked))
        except BaseException:
            os._exit(1)
        os._exit(0)

    forked = multiprocessing.get_context("fork").Process(target=child)
    forked.start()
    parent_acked = []
    for n in range(200, 300):  # the parent keeps working at the same time
        q.send(n)
        for m in q.receive():
            m.ack()
            parent_acked.append(m.body)
    forked.join(120)

    assert forked.exitcode == 0
    child_acked = json.loads(child_log.read_text())
    leftover = [m.body for m in receive_all(q)]
    everything = parent_acked + child_acked + leftover + [m.body for m in held]
    assert sorted(everything) == [*range(10), *range(100, 300)]
    assert q.stats().sent == 210
    if raw.is_sqlite:
        assert raw.execute("PRAGMA integrity_check") == [("ok",)]


# -- read-only files -----------------------------------------------------------------------------


@contextmanager
def read_only(*paths: Path) -> Iterator[None]:
    """Make files and directories read-only, even for root (which ignores chmod)."""
    if os.geteuid() == 0:
        if shutil.which("chattr") is None:
            pytest.skip("running as root without chattr: cannot make a file read-only")
        subprocess.run(["chattr", "+i", *map(str, paths)], check=True)
        try:
            yield
        finally:
            subprocess.run(["chattr", "-i", *map(str, paths)], check=True)
    else:
        modes = {p: p.stat().st_mode for p in paths}
        for p in paths:
            p.chmod(0o555 if p.is_dir() else 0o444)
        try:
            yield
        finally:
            for p, mode in modes.items():
                p.chmod(mode)


@pytest.mark.timeout(60)
def test_rule_28_a_read_only_database_file_gives_storage_error_naming_the_path(
        disk_path: Path) -> None:
    path = disk_path / "hailq.db"
    sqlite_url = f"sqlite:///{path}"
    with hailq.connect(sqlite_url) as broker:
        broker.queue("claims").send("written before")

    with (read_only(path, disk_path), pytest.raises(StorageError) as caught,
          hailq.connect(sqlite_url) as broker):
        broker.queue("claims").send("cannot be written")

    assert str(path) in str(caught.value)
    with hailq.connect(sqlite_url) as broker:  # writable again: works without repair
        q = broker.get_queue("claims")
        q.send("written after")
        assert [m.body for m in receive_all(q)] == ["written before", "written after"]


@pytest.mark.timeout(60)
def test_rule_28_an_open_broker_recovers_once_its_file_is_writable_again(
        disk_path: Path) -> None:
    path = disk_path / "hailq.db"
    sqlite_url = f"sqlite:///{path}"
    with hailq.connect(sqlite_url) as broker:
        q = broker.queue("claims")
        q.send("before")
        wal = Path(f"{path}-wal")
        assert wal.exists()

        with read_only(path, wal, disk_path):
            for _ in range(3):  # fails each time, quickly, without corrupting anything
                with pytest.raises(StorageError) as caught:
                    q.send("lost to the read-only file")
                assert str(path) in str(caught.value)

        q.send("after")
        assert [m.body for m in receive_all(q)] == ["before", "after"]
    with sqlite3.connect(path) as check:
        assert check.execute("PRAGMA integrity_check").fetchall() == [("ok",)]


def test_rule_28_a_database_in_a_missing_directory_names_the_path(tmp_path: Path) -> None:
    path = tmp_path / "no" / "such" / "dir" / "hailq.db"

    with pytest.raises(StorageError) as caught:
        hailq.connect(f"sqlite:///{path}")

    assert str(path) in str(caught.value)
    assert not (tmp_path / "no").exists()


# -- PostgreSQL: killed sessions -----------------------------------------------------------------


def kill_sessions(raw: RawDatabase, application_name: str) -> int:
    """Terminate the sessions of ``application_name``, each waited for until it is gone
    (up to 10 s); how many there were."""
    found = raw.execute(
        "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity "
        "WHERE application_name = ? AND pid <> pg_backend_pid()", (application_name,))
    assert all(gone for (gone,) in found), "a killed session outlived 10 s"
    return len(found)


@pytest.mark.timeout(120)
def test_rule_28_postgres_backend_recovers_when_its_sessions_are_killed(pg_url: str) -> None:
    name = f"hailq-conf-{uuid.uuid4().hex[:8]}"
    url = f"{pg_url}&application_name={name}"
    raw = RawDatabase("postgres", pg_url)
    with hailq.connect(url) as broker:
        q = broker.queue("claims", lease=300)
        wake = broker.queue("wake")
        q.send_many(["before 1", "before 2"])
        (held,) = q.receive()
        woke: list[list[hailq.Message]] = []
        waiter = threading.Thread(target=lambda: woke.append(wake.receive(wait=30)))
        waiter.start()
        time.sleep(0.5)  # no event says the waiter is listening now

        assert kill_sessions(raw, name) >= 1  # and they are gone

        held.ack()
        q.send("after")
        assert [m.body for m in receive_all(q)] == ["before 2", "after"]
        with hailq.connect(pg_url) as producer:
            producer.get_queue("wake").send("wake up")
        waiter.join(40)
        assert [[m.body for m in batch] for batch in woke] == [["wake up"]]
        assert q.stats().acked == 1
