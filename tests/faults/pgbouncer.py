"""A throwaway PgBouncer in front of the shared test server, for the pooler tests.

It listens on a free port of 127.0.0.1 only, lets every client in as the role it
names (``auth_type = trust``: a role must still be listed, so the server's
``postgres`` and the URL's role are), and serves every database of the server
with the pooling mode asked for. As root it runs as the ``postgres`` OS user,
as Debian's package would. Without the ``pgbouncer`` binary the tests skip,
except in CI (``CI=true``), where they fail.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from needs import unavailable
from ports import free_port


@dataclass
class PgBouncer:
    mode: str  # "transaction" or "session"
    port: int
    folder: Path
    proc: subprocess.Popen[bytes]

    def url_for(self, server_url: str) -> str:
        """``server_url`` (a libpq URL of the server PgBouncer fronts) through PgBouncer."""
        parts = urlsplit(server_url)
        user = f"{parts.username}@" if parts.username else ""
        return urlunsplit((parts.scheme, f"{user}127.0.0.1:{self.port}", parts.path,
                           parts.query, ""))

    def log(self) -> str:
        with contextlib.suppress(OSError):
            return (self.folder / "pgbouncer.log").read_text(errors="replace")[-4000:]
        return ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # PgBouncer's "exit at once"
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        shutil.rmtree(self.folder, ignore_errors=True)


def _missing(problem: str) -> None:
    """No PgBouncer here (see tests/needs.py)."""
    unavailable(problem, "the PgBouncer tests")


def start_pgbouncer(server_url: str, mode: str) -> PgBouncer:
    binary = shutil.which("pgbouncer") or (
        "/usr/sbin/pgbouncer" if os.path.exists("/usr/sbin/pgbouncer") else None)
    if binary is None:
        _missing("no pgbouncer binary (apt-get install pgbouncer)")
    assert binary is not None
    parts = urlsplit(server_url)
    folder = Path(tempfile.mkdtemp(prefix=f"hailq-pgbouncer-{mode}-"))
    port = free_port()
    roles = sorted({"postgres", parts.username or "postgres"})
    (folder / "userlist.txt").write_text("".join(f'"{r}" ""\n' for r in roles))
    (folder / "pgbouncer.ini").write_text(f"""\
[databases]
* = host={parts.hostname or '127.0.0.1'} port={parts.port or 5432}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {folder / 'userlist.txt'}
pool_mode = {mode}
max_client_conn = 500
default_pool_size = 40
# Round robin, not LIFO: consecutive transactions of one client land on different server
# connections, as under real load, so whatever relies on a session fails at once.
server_round_robin = 1
logfile = {folder / 'pgbouncer.log'}
pidfile = {folder / 'pgbouncer.pid'}
""")
    owner: dict[str, str] = {}
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres", "postgres")
        for f in folder.iterdir():
            shutil.chown(f, "postgres", "postgres")
        owner = {"user": "postgres", "group": "postgres"}
    proc = subprocess.Popen([binary, str(folder / "pgbouncer.ini")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            **owner)  # type: ignore[call-overload]
    bouncer = PgBouncer(mode, port, folder, proc)
    deadline = time.monotonic() + 15
    while True:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return bouncer
        if proc.poll() is not None or time.monotonic() > deadline:
            log = bouncer.log()
            bouncer.stop()
            raise RuntimeError(f"PgBouncer did not start: {log}")
        time.sleep(0.05)


@contextlib.contextmanager
def pgbouncer(server_url: str, mode: str) -> Iterator[PgBouncer]:
    bouncer = start_pgbouncer(server_url, mode)
    try:
        yield bouncer
    finally:
        bouncer.stop()
