"""A throwaway PostgreSQL server for the tests that restart, stop or break it.

The shared server (the one ``HAILQ_TEST_PG`` names) is never restarted by any
test. This one lives in a temporary directory on a free port and is destroyed
at the end of the session. As root, ``initdb`` and ``pg_ctl`` run as the
``postgres`` OS user. Without the binaries or that user the tests skip, except
in CI (``CI=true``), where they fail.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from needs import unavailable
from ports import free_port

PG_BIN = Path(os.environ.get("HAILQ_PG_BIN", "/usr/lib/postgresql/15/bin"))


def as_postgres(args: list[str]) -> list[str]:
    """``args`` run as the ``postgres`` OS user when the tests run as root."""
    if os.geteuid() != 0:
        return args
    return ["runuser", "-u", "postgres", "--", *args]



def need_binaries() -> None:
    """Skip (fail in CI) where PostgreSQL's binaries, or a way to run them, are missing."""
    problem = None
    if not (PG_BIN / "initdb").exists():
        problem = f"no PostgreSQL binaries in {PG_BIN} (set HAILQ_PG_BIN)"
    elif os.geteuid() == 0 and shutil.which("runuser") is None:
        problem = "running as root without runuser to become the postgres user"
    if problem:
        unavailable(problem, "the server-restart tests")


@dataclass
class PgServer:
    data: Path
    port: int
    log: Path

    @property
    def url(self) -> str:
        """A libpq URL of the server's ``hailq`` database (no hailq options)."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/hailq"

    def hailq_url(self, schema: str, **options: object) -> str:
        extra = "".join(f"&{k}={v}" for k, v in options.items())
        return f"{self.url}?schema={schema}{extra}"

    def ctl(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-l", str(self.log),
                          "-w", "-t", "60", *args]),
            capture_output=True, text=True, timeout=timeout, check=True)

    def start(self) -> None:
        self.ctl("start", "-o", f"-p {self.port} -k {self.data} -c listen_addresses=127.0.0.1")

    def stop(self, mode: str = "fast") -> None:
        self.ctl("stop", "-m", mode)

    def restart(self, mode: str = "fast") -> None:
        self.ctl("restart", "-m", mode, "-o",
                 f"-p {self.port} -k {self.data} -c listen_addresses=127.0.0.1")

    def psql(self, sql: str, db: str = "hailq") -> list[tuple[object, ...]]:
        import psycopg

        with psycopg.connect(f"postgresql://postgres@127.0.0.1:{self.port}/{db}",
                             autocommit=True, connect_timeout=5) as conn:
            cur = conn.execute(sql)
            return cur.fetchall() if cur.description else []

    def wait_ready(self, timeout: float = 30) -> float:
        """Seconds until the server accepts a query."""
        t0 = time.monotonic()
        while True:
            try:
                self.psql("SELECT 1")
                return time.monotonic() - t0
            except Exception:
                if time.monotonic() - t0 > timeout:
                    raise
                time.sleep(0.05)

    def destroy(self) -> None:
        with contextlib.suppress(Exception):
            self.stop("immediate")
        shutil.rmtree(self.data.parent, ignore_errors=True)


def start_throwaway(base: Path) -> PgServer:
    need_binaries()
    if os.geteuid() == 0:
        shutil.chown(base, "postgres", "postgres")
        os.chmod(base, 0o700)
    data = base / "data"
    done = subprocess.run(as_postgres([str(PG_BIN / "initdb"), "-D", str(data), "-U",
                                        "postgres", "-A", "trust", "--no-sync", "-E", "UTF8"]),
                          capture_output=True, text=True, timeout=120)
    if done.returncode:
        raise RuntimeError(f"initdb failed: {done.stderr.strip()}")
    server = PgServer(data=data, port=free_port(), log=base / "server.log")
    server.start()
    server.psql("CREATE DATABASE hailq", db="postgres")
    return server
