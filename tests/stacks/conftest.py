"""Databases for the user's own stacks (SPEC rule 38): a PostgreSQL schema, a MariaDB
database and a SQLite file of their own per test, each with an ``effects`` table that
the scenarios write beside the inbox. Without a server the tests skip with the reason,
except in CI, where they fail."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import PG_URL, require_postgres
from needs import unavailable

MARIADB = {"host": os.environ.get("HAILQ_TEST_MARIADB_HOST", "127.0.0.1"),
           "port": int(os.environ.get("HAILQ_TEST_MARIADB_PORT", "3306")),
           "user": os.environ.get("HAILQ_TEST_MARIADB_USER", "root")}
EFFECTS = "CREATE TABLE effects (message_id VARCHAR(64) NOT NULL)"


@dataclass(frozen=True)
class Place:
    """Where one test's tables live, as each driver needs to be told."""

    sqlite: Path | None = None
    pg_schema: str | None = None
    mysql_db: str | None = None

    @property
    def pg_dsn(self) -> str:
        return f"{PG_URL.split('?')[0]}?options=-c%20search_path%3D{self.pg_schema}"


@pytest.fixture
def sqlite_place(tmp_path: Path) -> Place:
    import sqlite3

    path = tmp_path / "app.db"
    with sqlite3.connect(path) as conn:
        conn.execute(EFFECTS)
    conn.close()
    return Place(sqlite=path)


@pytest.fixture
def pg_place() -> Iterator[Place]:
    require_postgres()
    import psycopg

    schema = f"hailq_app_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(f'CREATE TABLE "{schema}".effects (message_id VARCHAR(64) NOT NULL)')
    yield Place(pg_schema=schema)
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture
def mysql_place() -> Iterator[Place]:
    import pymysql

    try:
        admin = pymysql.connect(**MARIADB, autocommit=True)  # type: ignore[arg-type]
    except pymysql.err.Error as exc:
        unavailable(f"MariaDB at {MARIADB['host']}:{MARIADB['port']} is not reachable "
                    f"({exc}); start it to run these tests", "the MariaDB tests")
    name = f"hailq_app_{uuid.uuid4().hex[:12]}"
    with admin.cursor() as cur:
        cur.execute(f"CREATE DATABASE {name}")
        cur.execute(f"CREATE TABLE {name}.effects (message_id VARCHAR(64) NOT NULL)")
    yield Place(mysql_db=name)
    with admin.cursor() as cur:
        cur.execute(f"DROP DATABASE {name}")
    admin.close()
