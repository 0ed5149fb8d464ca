"""SPEC rule 28 on SQLite: a full disk and a read-only file system.

The database lives on a small tmpfs of its own (``mount -t tmpfs -o size=2m``,
root only), which the test fills with a filler file or remounts read-only
while a real worker process runs. Expected: a StorageError that names the
database path, a worker that backs off instead of spinning (its CPU time is
measured), a file that passes ``integrity_check`` throughout, and recovery
without any restart once space returns or the file system is writable again.
Without permission to mount the tests skip, except in CI, where they fail.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import hailq
from needs import unavailable
from waiting import wait_until

from .conftest import Figure
from .ledger import EffectStore, Ledger, check_queue, sqlite_integrity
from .workers import WorkerFleet, unfinished

BODY_PAD = "x" * 10_000


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cpu_share(pid: int, seconds: float) -> float:
    before, t0 = _cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    return (_cpu_seconds(pid) - before) / (time.monotonic() - t0)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs mounted for this test alone."""
    disk = tmp_path / "disk"
    disk.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)],
                          capture_output=True, text=True)
    if done.returncode:
        unavailable(f"cannot mount a tmpfs ({done.stderr.strip()}); run as root",
                    "the full-disk tests")
    try:
        yield disk
    finally:
        if subprocess.run(["umount", str(disk)], capture_output=True).returncode:
            subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def _fill(disk: Path) -> Path:
    """Write a filler file until the file system is full."""
    filler = disk / "filler"
    chunk = b"\0" * 4096
    with open(filler, "wb", buffering=0) as f:
        try:
            while True:
                f.write(chunk)
        except OSError:
            pass
    return filler


def _send_until_storage_error(q: hailq.Queue, ledger: Ledger, start: int,
                              limit: int = 2000) -> tuple[hailq.StorageError, float]:
    """Send 10 kB messages until one fails; return the error and how long that send took."""
    for n in range(start, start + limit):
        t0 = time.monotonic()
        try:
            ledger.add([q.send({"n": n, "pad": BODY_PAD})], [n])
        except hailq.StorageError as exc:
            return exc, time.monotonic() - t0
    raise AssertionError(f"{limit} sends of 10 kB succeeded on a full 2 MiB disk")


def _scenario(disk: Path, effects: EffectStore, tmp_path: Path, figure: Figure, kind: str,
              break_it: Callable[[], None], repair: Callable[[], None]) -> None:
    path = str(disk / "hailq.db")
    url = f"sqlite:///{path}"
    ledger = Ledger()
    with hailq.connect(url) as broker:
        q = broker.queue("disk", lease=5, max_attempts=50,
                         retry={"base": 0.05, "max": 0.5, "jitter": 0})
        ledger.add(q.send_many([{"n": n} for n in range(50)]), range(50))
        break_it()
        error, took = _send_until_storage_error(q, ledger, 1000)
        text = str(error)
        assert path in text, text
        assert sqlite_integrity(path) == "ok"

        # A worker started now finds the storage broken: it must back off, not spin.
        f = WorkerFleet(url, "disk", effects, tmp_path, processes=1, concurrency=2, grace=5)
        try:
            time.sleep(1.5)  # past its start-up
            alive = f.procs[0].poll() is None
            cpu = _cpu_share(f.procs[0].pid, 3.0) if alive else None
            retry_error, retry_took = _send_until_storage_error(q, ledger, 5000, limit=5)
            assert sqlite_integrity(path) == "ok"

            repair()
            t_repair = time.monotonic()
            # The same broker, never reopened: sends work again at once.
            ledger.add([q.send({"n": 9000})], [9000])
            f.restart_dead()
            wait_until(lambda: not unfinished(q), 30, step=0.1)
            recovered = time.monotonic() - t_repair
            codes = f.stop()
            tail = f.log_tail()
        finally:
            f.kill_all()
        report = check_queue(ledger, effects, q)
    figure(kind=kind, error=text, error_after_s=round(took, 3),
           worker_alive_during_fault=alive,
           worker_cpu_share_during_fault=None if cpu is None else round(cpu, 3),
           recovered_s=round(recovered, 2), **report.summary())
    assert took < 5 and retry_took < 5, (took, retry_took)
    assert path in str(retry_error)
    assert alive, f"the worker died on broken storage\n{tail}"
    assert cpu is not None and cpu < 0.2, f"worker used {cpu:.0%} of a CPU while storage was " \
                                          f"broken (busy loop?)\n{tail}"
    assert report.ok, f"{report}\n{tail}"
    assert codes == [0], tail
    assert sqlite_integrity(path) == "ok"


def test_full_disk_gives_storage_error_naming_the_path_and_recovers_without_restart(
        small_disk: Path, tmp_path: Path, figure: Figure) -> None:
    effects = EffectStore(f"sqlite:///{tmp_path / 'effects.db'}")
    effects.create()
    filler: list[Path] = []
    _scenario(small_disk, effects, tmp_path, figure, "full disk",
              lambda: filler.append(_fill(small_disk)), lambda: filler[0].unlink())


def test_read_only_database_files_give_storage_error_naming_the_path_and_recover(
        tmp_path: Path, disk_path: Path, figure: Figure) -> None:
    """Root ignores file modes and a tmpfs with open files cannot be remounted read-only,
    so the database's files and directory are made immutable (``chattr +i``)."""
    if os.geteuid() != 0 or shutil.which("chattr") is None:
        pytest.skip("needs root and chattr to make files read-only for root")
    disk = disk_path / "ro"
    disk.mkdir()
    effects = EffectStore(f"sqlite:///{tmp_path / 'effects.db'}")
    effects.create()
    # Not the -shm file: it is memory-mapped, and an immutable mapping faults (SIGBUS).
    files = [disk / "hailq.db", disk / "hailq.db-wal", disk]

    def chattr(flag: str) -> None:
        subprocess.run(["chattr", flag, *map(str, files)], check=True)

    try:
        _scenario(disk, effects, tmp_path, figure, "read-only files",
                  lambda: chattr("+i"), lambda: chattr("-i"))
    finally:
        subprocess.run(["chattr", "-i", *map(str, files)], capture_output=True)
