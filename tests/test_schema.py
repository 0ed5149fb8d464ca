"""The migrated schema equals the checked-in ``schema.sql`` of each backend.

A migration that changes the schema must come with the new ``schema.sql``
(regenerate with ``python tests/test_schema.py``), so every schema change is
reviewed as a diff, and migrations never drift from what a fresh install gets.
"""

from __future__ import annotations

import multiprocessing
import sqlite3
import sys
import time
from pathlib import Path

import psycopg
import pytest

import hailq

ROOT = Path(__file__).resolve().parent.parent / "src" / "hailq" / "backends"
SQLITE_SCHEMA = ROOT / "sqlite" / "schema.sql"
POSTGRES_SCHEMA = ROOT / "postgres" / "schema.sql"


def sqlite_schema(path: str) -> str:
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL "
            "AND name NOT LIKE 'sqlite_%' ORDER BY type, name").fetchall()
    return "".join(f"-- {kind} {name}\n{sql};\n\n" for kind, name, sql in rows)


def postgres_schema(conninfo: str, schema: str) -> str:
    """Tables, columns, indexes, functions and triggers of ``schema``, with its name
    replaced by ``{schema}`` so any schema name compares equal."""
    with psycopg.connect(conninfo) as conn:
        columns = conn.execute(
            "SELECT table_name, column_name, data_type, is_nullable, "
            "coalesce(column_default, ''), is_identity FROM information_schema.columns "
            "WHERE table_schema = %s ORDER BY table_name, ordinal_position", (schema,)).fetchall()
        indexes = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = %s ORDER BY indexname",
            (schema,)).fetchall()
        routines = conn.execute(
            "SELECT p.proname, pg_get_function_result(p.oid) FROM pg_proc p "
            "JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = %s "
            "ORDER BY p.proname", (schema,)).fetchall()
        triggers = conn.execute(
            "SELECT pg_get_triggerdef(t.oid) FROM pg_trigger t JOIN pg_class c "
            "ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND NOT t.tgisinternal ORDER BY t.tgname", (schema,)).fetchall()
        sequences = conn.execute(
            "SELECT sequence_name, data_type, start_value, increment, cycle_option "
            "FROM information_schema.sequences WHERE sequence_schema = %s "
            "ORDER BY sequence_name", (schema,)).fetchall()
    lines = ["-- columns: table.column type null default identity"]
    lines += [" ".join(str(v) for v in row) for row in columns]
    lines += ["", "-- indexes"] + [row[0] for row in indexes]
    lines += ["", "-- functions"] + [f"{name} returns {result}" for name, result in routines]
    lines += ["", "-- triggers"] + [row[0] for row in triggers]
    lines += ["", "-- sequences: name type start increment cycle"]
    lines += [" ".join(str(v) for v in row) for row in sequences]
    text = "\n".join(lines) + "\n"
    return text.replace(f'"{schema}"', "{schema}").replace(schema, "{schema}")


def test_sqlite_migrations_give_the_checked_in_schema(tmp_path: Path) -> None:
    path = tmp_path / "schema.db"
    hailq.connect(f"sqlite:///{path}").close()
    assert sqlite_schema(str(path)) == SQLITE_SCHEMA.read_text()


def test_postgres_migrations_give_the_checked_in_schema(pg_url: str) -> None:
    from hailq.url import parse_url

    hailq.connect(pg_url).close()
    parsed = parse_url(pg_url)
    assert postgres_schema(parsed.target, parsed.options["schema"]) == \
        POSTGRES_SCHEMA.read_text()


def test_migrating_twice_changes_nothing(url: str) -> None:
    first = hailq.connect(url)
    version = first.migrate()
    assert first.migrate() == version
    first.close()


def test_a_new_sqlite_database_gets_small_pages(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    hailq.connect(f"sqlite:///{path}").queue("claims").send({"claim": 1})
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA page_size").fetchone()[0] == 1024


def test_an_existing_sqlite_database_keeps_its_page_size_and_works(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:  # as an earlier hailq (SQLite's default) made it
        conn.execute("PRAGMA page_size=4096")
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("CREATE TABLE unrelated (x)")
    queue = hailq.connect(f"sqlite:///{path}").queue("claims")
    queue.send({"claim": 1})
    [message] = queue.receive()
    message.ack()
    assert queue.stats().acked == 1
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA page_size").fetchone()[0] == 4096
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_a_version_2_sqlite_database_migrates_with_its_messages_and_leases(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Migration 3 rebuilds the message table without the id index, migration 4 gives
    queues their live settings columns: every message keeps its id, position and state,
    and leases taken before them still settle."""
    from hailq.backends.sqlite import backend
    from hailq.codec import encode_body
    from hailq.ids import new_message_id

    path = tmp_path / "v2.db"
    url = f"sqlite:///{path}"
    with monkeypatch.context() as patch:
        patch.setattr(backend, "MIGRATIONS", backend.MIGRATIONS[:2])
        old = hailq.connect(url)
        assert old.migrate() == 2
        old.close()
    # What a version-2 hailq wrote: a queue, six plain messages and a keyed one, the
    # first three leased (receipts of that time name id and token only).
    now = time.time()
    settings = hailq.QueueSettings(lease=300).to_json()
    legacy = []
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO hailq_queues VALUES ('claims', ?, ?)", (settings, now))
        conn.execute("INSERT INTO hailq_counters (queue, sent) VALUES ('claims', 7)")
        for n, body in enumerate([*range(6), "keyed"]):
            data, kind = encode_body({"claim": body}, 1 << 20)
            message_id, token = new_message_id(), f"{n:016x}"
            leased = n < 3
            conn.execute(
                "INSERT INTO hailq_messages (id, queue, state, body, body_kind, priority, "
                "ordering_key, sort_key, attempt, enqueued_at, available_at, lease_until, "
                "token) VALUES (?, 'claims', ?, ?, ?, 0, ?, 0, ?, ?, ?, ?, ?)",
                (message_id, "leased" if leased else "ready", data, kind,
                 "contract-7" if body == "keyed" else None, int(leased), now, now,
                 now + 300 if leased else None, token if leased else None))
            if leased:
                legacy.append(f"{message_id}.{token}")
        before = conn.execute("SELECT seq, id, state, token FROM hailq_messages "
                              "ORDER BY seq").fetchall()
        assert "sqlite_autoindex_hailq_messages_1" in _index_names(conn)

    broker = hailq.connect(url)
    assert broker.migrate() == len(backend.MIGRATIONS) >= 4
    with sqlite3.connect(path) as conn:
        after = conn.execute("SELECT seq, id, state, token FROM hailq_messages "
                             "ORDER BY seq").fetchall()
        assert "sqlite_autoindex_hailq_messages_1" not in _index_names(conn)
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("SELECT lease, max_attempts FROM hailq_queues").fetchall() \
            == [(300.0, 5)]
    assert after == before
    claims = broker.get_queue("claims")
    claims.ack(legacy[0])
    claims.nack(legacy[1], delay=0)
    assert claims.extend(legacy[2], 60) > 0
    claims.ack(legacy[2])
    rest = claims.receive(10)
    assert [m.body["claim"] for m in rest] == [1, 3, 4, 5, "keyed"]
    claims.ack_many(rest)
    assert claims.stats().acked == 7


def _index_names(conn: sqlite3.Connection) -> set[str]:
    return {r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'hailq_messages'")}


if __name__ == "__main__":  # regenerate the checked-in files
    import tempfile
    import uuid

    from conftest import PG_URL, drop_schema

    with tempfile.TemporaryDirectory() as tmp:
        hailq.connect(f"sqlite:///{tmp}/s.db").close()
        SQLITE_SCHEMA.write_text(sqlite_schema(f"{tmp}/s.db"))
    name = f"hailq_schema_{uuid.uuid4().hex[:8]}"
    hailq.connect(f"{PG_URL}?schema={name}").close()
    POSTGRES_SCHEMA.write_text(postgres_schema(PG_URL, name))
    drop_schema(name)
    sys.exit(0)


def _first_use(url: str, n: int, start: float) -> str:
    """One process of a fleet starting together: wait for the common start, then connect
    (migrating the fresh database) and send one message."""
    time.sleep(max(0.0, start - time.time()))
    broker = hailq.connect(url)
    message_id = broker.queue("claims").send({"process": n})
    broker.close()
    return message_id


def test_processes_starting_together_on_a_fresh_database_all_work(url: str) -> None:
    """Eight workers started at once by a deploy all find, or make, one schema: none fails
    on a table another is creating, no migration runs twice, every send lands."""
    start = time.time() + 1.5  # after every child has imported hailq
    with multiprocessing.get_context("spawn").Pool(8) as pool:
        ids = pool.starmap(_first_use, [(url, n, start) for n in range(8)])
    broker = hailq.connect(url)
    queue = broker.queue("claims")
    got = queue.receive(max_messages=10)
    assert sorted(m.id for m in got) == sorted(ids)
    assert sorted(m.body["process"] for m in got) == list(range(8))
    assert broker.migrate() == _newest_migration(url)  # each migration ran, once
    broker.close()


def _newest_migration(url: str) -> int:
    folder = ROOT / ("postgres" if url.startswith("postgresql") else "sqlite") / "migrations"
    return max(int(p.name.split("_", 1)[0]) for p in folder.glob("*.sql"))


def _pg_schema_url(pg_url: str) -> tuple[str, str]:
    from urllib.parse import parse_qsl, urlsplit

    return pg_url, dict(parse_qsl(urlsplit(pg_url).query))["schema"]


def test_postgres_refuses_a_schema_that_holds_someone_elses_objects(pg_url: str) -> None:
    """Rule 30: hailq migrates only an empty schema or its own, and its bookkeeping table
    says hailq (an application's own schema_version table is never read or written)."""
    from conftest import PG_URL

    url, schema = _pg_schema_url(pg_url)
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(f'CREATE TABLE "{schema}".schema_version (version integer)')
        conn.execute(f'INSERT INTO "{schema}".schema_version VALUES (42)')
    with pytest.raises(hailq.SchemaError, match="not hailq's"):
        hailq.connect(url)
    with psycopg.connect(PG_URL) as conn:
        tables = {r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,))}
        assert tables == {"schema_version"}
        assert conn.execute(f'SELECT version FROM "{schema}".schema_version').fetchall() \
            == [(42,)]


def test_postgres_installs_into_an_empty_schema_under_a_name_that_says_hailq(
        pg_url: str) -> None:
    from conftest import PG_URL

    url, schema = _pg_schema_url(pg_url)
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    hailq.connect(url).close()
    with psycopg.connect(PG_URL) as conn:
        tables = {r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,))}
    assert "hailq_schema_version" in tables and "schema_version" not in tables


def test_postgres_a_schema_of_an_earlier_hailq_is_upgraded_in_place(pg_url: str) -> None:
    """Schemas made before the version table's name said hailq are still hailq's."""
    from conftest import PG_URL

    url, schema = _pg_schema_url(pg_url)
    broker = hailq.connect(url)
    sent = broker.queue("claims").send({"n": 1})
    broker.close()
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'ALTER TABLE "{schema}".hailq_schema_version RENAME TO schema_version')
    broker = hailq.connect(url, migrate=False)
    assert broker.schema_status()[0] == _newest_migration(url)
    broker.migrate()
    [m] = broker.queue("claims").receive()
    assert m.id == sent
    broker.close()
    with psycopg.connect(PG_URL) as conn:
        tables = {r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,))}
    assert "hailq_schema_version" in tables and "schema_version" not in tables
