"""A primary and a streaming standby of the test's own, for the failover tests.

Both servers live in one temporary directory on free loopback ports, made as an
operator would: ``initdb`` for the primary, ``pg_basebackup -R`` for the
standby (which then streams from the primary), and for synchronous replication
``synchronous_standby_names = '*'`` on the primary, set with ``ALTER SYSTEM``
before the base backup. The standby's configuration is the primary's copy, so
once promoted it still lists a synchronous standby that it does not have:
``clear_sync_on_standby`` removes that line first, as a failover manager does;
left in place, every commit on the promoted standby waits for ever (rule 31).

The shared server is never touched. Without the binaries the tests skip, except
in CI (``CI=true``), where they fail (see ``pgserver.need_binaries``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from .pgserver import PG_BIN, PgServer, as_postgres, free_port, need_binaries


def server_pids(server: PgServer) -> list[int]:
    """The postmaster's pid and its children's (the backends, the WAL sender...)."""
    postmaster = int((server.data / "postmaster.pid").read_text().split()[0])
    children = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                with open(f"/proc/{entry}/stat") as f:
                    stat = f.read()
                if int(stat.rsplit(")", 1)[1].split()[1]) == postmaster:
                    children.append(int(entry))
    return [postmaster, *children]


@dataclass
class PgCluster:
    """A primary and its standby; ``url`` names both as one libpq multi-host URL."""

    base: Path
    primary: PgServer
    standby: PgServer
    sync: bool
    frozen: list[int] = field(default_factory=list)

    @property
    def url(self) -> str:
        """The libpq multi-host URL of the ``hailq`` database: whichever server is the
        primary (accepts writes) serves it."""
        return (f"postgresql://postgres@127.0.0.1:{self.primary.port},"
                f"127.0.0.1:{self.standby.port}/hailq?target_session_attrs=read-write")

    def hailq_url(self, schema: str, **options: object) -> str:
        extra = "".join(f"&{k}={v}" for k, v in options.items())
        return f"{self.url}&schema={schema}{extra}"

    def wait_streaming(self, timeout: float = 60) -> str:
        """Wait until the standby streams from the primary; its ``sync_state``."""
        want = "sync" if self.sync else "async"
        deadline = time.monotonic() + timeout
        while True:
            rows = self.primary.psql("SELECT sync_state FROM pg_stat_replication "
                                     "WHERE state = 'streaming'", db="postgres")
            if rows and rows[0][0] == want:
                return want
            if time.monotonic() > deadline:
                raise RuntimeError(f"the standby is not streaming ({want}) after {timeout} s: "
                                   f"{rows}")
            time.sleep(0.1)

    def kill_primary(self) -> float:
        """SIGKILL the primary's postmaster and every one of its processes at once, as if
        its machine had vanished; the wall-clock time of the kill."""
        pids = server_pids(self.primary)
        at = time.time()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.01)
        return at

    def freeze_primary(self) -> float:
        """SIGSTOP every process of the primary: its connections stay open and its kernel
        still acknowledges packets, but nothing answers (a frozen machine). ``destroy``
        kills them. The wall-clock time of the freeze."""
        self.frozen = server_pids(self.primary)
        at = time.time()
        for pid in self.frozen:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
        return at

    def promote(self) -> float:
        """``pg_ctl promote`` the standby and wait until it accepts writes; seconds taken."""
        t0 = time.monotonic()
        self.standby.ctl("promote")
        deadline = t0 + 60
        while self.standby.psql("SELECT pg_is_in_recovery()", db="postgres")[0][0]:
            if time.monotonic() > deadline:
                raise RuntimeError("the standby is still in recovery 60 s after promote")
            time.sleep(0.02)
        return time.monotonic() - t0

    def received_lsn(self) -> str:
        """The last WAL position the standby received (replayed or not)."""
        return str(self.standby.psql("SELECT pg_last_wal_receive_lsn()", db="postgres")[0][0])

    def destroy(self) -> None:
        for pid in self.frozen:  # stopped: nothing else would end them
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for server in (self.primary, self.standby):
            with contextlib.suppress(Exception):
                server.stop("immediate")
        shutil.rmtree(self.base, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def start_cluster(base: Path, *, sync: bool = True, clear_sync_on_standby: bool = True,
                  ) -> PgCluster:
    """A primary with a database ``hailq`` and a standby streaming from it, both running.

    ``sync``: the standby is synchronous (a send returns only once the standby has its
    WAL) or asynchronous. ``clear_sync_on_standby``: the standby's copied
    configuration stops listing a synchronous standby, so that it can commit once
    promoted; False keeps the copy as the base backup made it."""
    need_binaries()
    if os.geteuid() == 0:
        shutil.chown(base, "postgres", "postgres")
        os.chmod(base, 0o700)
    primary = PgServer(data=base / "primary", port=free_port(), log=base / "primary.log")
    done = subprocess.run(as_postgres([str(PG_BIN / "initdb"), "-D", str(primary.data), "-U",
                                       "postgres", "-A", "trust", "--no-sync", "-E", "UTF8"]),
                          capture_output=True, text=True, timeout=120)
    if done.returncode:
        raise RuntimeError(f"initdb failed: {done.stderr.strip()}")
    standby = PgServer(data=base / "standby", port=free_port(), log=base / "standby.log")
    cluster = PgCluster(base, primary, standby, sync)
    try:
        primary.start()
        primary.psql("CREATE DATABASE hailq", db="postgres")
        if sync:
            # Not reloaded yet: no commit may wait for a standby that does not exist.
            primary.psql("ALTER SYSTEM SET synchronous_standby_names = '*'", db="postgres")
        done = subprocess.run(as_postgres([
            str(PG_BIN / "pg_basebackup"), "-D", str(standby.data), "-h", "127.0.0.1",
            "-p", str(primary.port), "-U", "postgres", "-R", "-X", "stream",
            "-c", "fast", "--no-sync"]), capture_output=True, text=True, timeout=120)
        if done.returncode:
            raise RuntimeError(f"pg_basebackup failed: {done.stderr.strip()}")
        if clear_sync_on_standby:
            with (standby.data / "postgresql.auto.conf").open("a") as f:
                f.write("synchronous_standby_names = ''\n")
        standby.start()
        if sync:
            primary.psql("SELECT pg_reload_conf()", db="postgres")
        cluster.wait_streaming()
    except BaseException:
        cluster.destroy()
        raise
    return cluster
