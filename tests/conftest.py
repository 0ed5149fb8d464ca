"""Shared fixtures: one ``broker`` fixture runs every conformance test on every backend.

PostgreSQL tests use the server at ``HAILQ_TEST_PG`` (default
postgresql://postgres@127.0.0.1:5432/test), each test in a schema of its own.
Without a server they are skipped with a clear message, except in CI
(``CI=true``), where they are required and fail instead.

Test files (SQLite databases, the handlers' effects) live on a RAM disk where there is one
(``HAILQ_TEST_TMP``, default ``/dev/shm``; ``--basetemp`` wins): they commit thousands of
times, and on a disk an fsync per commit made up most of the suite's time. The tests kill
processes, never the machine, so what a commit promises them holds there as on a disk.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql

import hailq
from needs import unavailable

PG_URL = os.environ.get("HAILQ_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
# pytest-xdist's workers get COLUMNS from the controller's terminal (80 here), and hailq's
# CLI obeys COLUMNS when its output is piped: a test that wants a width passes its own.
os.environ.pop("COLUMNS", None)
_pg_state: dict[str, str | None] = {}


def postgres_problem() -> str | None:
    """None if the test server answers, else why not (checked once per session)."""
    if "problem" not in _pg_state:
        try:
            import psycopg

            with psycopg.connect(PG_URL, connect_timeout=3) as conn:
                conn.execute("SELECT 1")
            _pg_state["problem"] = None
        except Exception as exc:  # any failure to reach the server
            _pg_state["problem"] = f"{type(exc).__name__}: {exc}".strip()
    return _pg_state["problem"]


def require_postgres() -> None:
    problem = postgres_problem()
    if problem is None:
        return
    unavailable(f"PostgreSQL at {PG_URL} is not reachable ({problem}); set HAILQ_TEST_PG "
                "or start PostgreSQL to run these tests", "the PostgreSQL tests")


def drop_schema(schema: str, attempts: int = 5) -> None:
    import psycopg

    for attempt in range(attempts):
        try:
            with psycopg.connect(PG_URL, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            return
        except psycopg.errors.DeadlockDetected:
            # A process the test started may still be ending its last transaction there.
            if attempt == attempts - 1:
                raise
            time.sleep(0.5)


@pytest.fixture
def disk_path() -> Iterator[Path]:
    """A directory on a disk, not the RAM disk: for what tmpfs does differently (an
    immutable file there still takes writes through a descriptor opened before)."""
    path = Path(tempfile.mkdtemp(prefix="hailq-test-", dir="/var/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'hailq.db'}"


@pytest.fixture
def pg_url() -> Iterator[str]:
    require_postgres()
    schema = f"hailq_t_{uuid.uuid4().hex[:12]}"
    sep = "&" if "?" in PG_URL else "?"
    yield f"{PG_URL}{sep}schema={schema}"
    drop_schema(schema)


@pytest.fixture(params=["sqlite", "postgres"])
def backend_name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def url(backend_name: str, request: pytest.FixtureRequest) -> str:
    """A fresh, empty database URL for the backend under test."""
    name = "sqlite_url" if backend_name == "sqlite" else "pg_url"
    return str(request.getfixturevalue(name))


@pytest.fixture
def broker(url: str) -> Iterator[hailq.Broker]:
    b = hailq.connect(url)
    yield b
    b.close()


@pytest.fixture
def reader_url(pg_url: str) -> Iterator[str]:
    """``pg_url`` as a login role that may only read hailq's tables (rule 30)."""
    schema = pg_url.rsplit("schema=", 1)[1]
    hailq.connect(pg_url).close()
    role = f"hailq_ro_{uuid.uuid4().hex[:12]}"
    server = pg_url.rsplit("?", 1)[0]
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        conn.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(
            sql.Identifier(schema), sql.Identifier(role)))
        conn.execute(sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA {} TO {}").format(
            sql.Identifier(schema), sql.Identifier(role)))
    parts = urlsplit(pg_url)
    try:
        yield urlunsplit(parts._replace(netloc=f"{role}@{parts.netloc.rpartition('@')[2]}"))
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


_ram_temp: list[Path] = []


def pytest_configure(config: pytest.Config) -> None:
    """Point ``tmp_path`` at the RAM disk (in the main process: xdist's workers take
    their ``basetemp`` below the main one's)."""
    if config.option.basetemp or hasattr(config, "workerinput"):
        return
    root = Path(os.environ.get("HAILQ_TEST_TMP", "/dev/shm"))
    # (a container's /dev/shm is often 64 MB: the suite's files need a few GB at most)
    if root.is_dir() and os.access(root, os.W_OK) and shutil.disk_usage(root).free > 4 << 30:
        _ram_temp.append(Path(tempfile.mkdtemp(prefix="hailq-test-", dir=root)))
        config.option.basetemp = str(_ram_temp[0])


def pytest_unconfigure(config: pytest.Config) -> None:
    for path in _ram_temp:  # RAM: nothing of it outlives the run
        shutil.rmtree(path, ignore_errors=True)


# Catalog tables that every CREATE/DROP SCHEMA of the suite leaves dead rows in.
_CATALOG = ("pg_attribute", "pg_depend", "pg_class", "pg_index", "pg_type", "pg_attrdef",
            "pg_constraint", "pg_proc", "pg_namespace", "pg_trigger", "pg_sequence")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Vacuum the catalog the suite churned through. Autovacuum would, but a test server
    may run without it (this project's does), and a bloated catalog slows every later
    connection and plan on it."""
    if _pg_state.get("problem", "not used") is not None:
        return  # PostgreSQL was not used in this session
    import psycopg

    try:
        with psycopg.connect(PG_URL, autocommit=True, connect_timeout=3) as conn:
            conn.execute("VACUUM " + ", ".join(f"pg_catalog.{t}" for t in _CATALOG))
    except psycopg.Error:
        pass  # not the test server's owner: nothing to tidy


@pytest.fixture(autouse=True)
def sigint_as_python_starts() -> Iterator[None]:
    """Each test starts with Ctrl-C raising KeyboardInterrupt, as a fresh Python's does.

    A process started by a test inherits an ignored SIGINT (and Python then installs no
    KeyboardInterrupt handler in it): a test that leaves SIGINT ignored in this pytest
    process would make a later test's Ctrl-C reach nobody."""
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
