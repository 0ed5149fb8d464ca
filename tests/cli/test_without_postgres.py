"""``pip install hailq`` is SQLite only: without the PostgreSQL driver, SQLite works and a
PostgreSQL URL is one clear error (``BackendUnavailable``; exit 2 on the command line).

Each test runs Python in a subprocess whose import system refuses psycopg, as if the
``postgres`` extra had not been installed.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from .conftest import Result

MISSING = "PostgreSQL support is not installed, install it with pip install 'hailq[postgres]'"
PG = "postgresql://postgres@127.0.0.1:5432/test"

WITHOUT_PSYCOPG = textwrap.dedent("""
    import sys

    class NotInstalled:
        # Refuses the PostgreSQL driver as an environment without it would.
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in ("psycopg", "psycopg_pool", "psycopg_binary"):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, NotInstalled())
    for loaded in [m for m in sys.modules if m.startswith("psycopg")]:
        del sys.modules[loaded]

    def psycopg_loaded():
        return sorted(m for m in sys.modules if m.startswith("psycopg"))
""")


def python_without_psycopg(code: str, *args: str, cwd: Path | None = None) -> Result:
    done = subprocess.run([sys.executable, "-c", WITHOUT_PSYCOPG + textwrap.dedent(code),
                           *args], capture_output=True, text=True, cwd=cwd, timeout=120,
                          stdin=subprocess.DEVNULL)
    return Result(done.returncode, done.stdout, done.stderr)


def hailq_without_psycopg(*args: str, cwd: Path | None = None) -> Result:
    return python_without_psycopg("""
        from hailq.cli.main import run
        sys.exit(run(sys.argv[1:]))
    """, *args, cwd=cwd)


def test_import_hailq_and_a_sqlite_broker_need_no_postgres_driver(tmp_path: Path) -> None:
    result = python_without_psycopg("""
        import hailq

        assert psycopg_loaded() == [], psycopg_loaded()
        with hailq.connect(sys.argv[1]) as broker:
            claims = broker.queue("claims")
            claims.send({"claim": 8311})
            (message,) = claims.receive(wait=1)
            message.ack()
            print(message.body["claim"], broker.get_queue("claims").stats().acked)
        import hailq.cli.main
        assert psycopg_loaded() == [], psycopg_loaded()
    """, f"sqlite:///{tmp_path / 'claims.db'}")
    assert result.code == 0, result.err
    assert result.out.split() == ["8311", "1"]


def test_a_postgres_url_without_the_driver_is_backend_unavailable() -> None:
    result = python_without_psycopg("""
        import hailq

        for url in sys.argv[1:]:
            try:
                hailq.connect(url)
            except hailq.BackendUnavailable as exc:
                assert isinstance(exc, hailq.HailqError)
                print(exc)
            else:
                raise SystemExit(f"{url}: connected without psycopg")
    """, PG, "postgres://postgres@127.0.0.1:5432/test?schema=claims&pool_size=2")
    assert result.code == 0, result.err
    assert result.out.splitlines() == [MISSING, MISSING]


def test_the_command_line_says_what_to_install_and_exits_2(tmp_path: Path) -> None:
    for args in (["queues", "--url", PG], ["send", "--create", "claims", "1", "--url", PG],
                 ["worker", "checkers:app", "--url", PG]):
        line = hailq_without_psycopg(*args, cwd=tmp_path).assert_clean_error(2)
        assert line == f"hailq: error: {MISSING}"
    url = f"sqlite:///{tmp_path / 'claims.db'}"
    assert hailq_without_psycopg("send", "--create", "claims", "1", "--url", url).code == 0
    listed = hailq_without_psycopg("queues", "--json", "--url", url)
    assert listed.json()[0]["queue"] == "claims"
