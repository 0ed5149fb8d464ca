"""Rule 30 for ``hailq bench``: it empties only schemas it created and marked, and
refuses any other before anything is dropped or written.

Each test works in schemas of its own (``hailq_bt_<random>``, + ``_raw``, + ``_workers``)
and drops them at the end; the shared server's other schemas are never touched.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from conftest import PG_URL, require_postgres
from hailq.cli.main import run

SCRATCH_MARK = "hailq bench scratch schema"


def _url(schema: str) -> str:
    sep = "&" if "?" in PG_URL else "?"
    return f"{PG_URL}{sep}schema={schema}"


def _execute(statement: sql.Composable | str, args: tuple[object, ...] = ()) -> list[tuple]:
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        cur = conn.execute(statement, args)
        return cur.fetchall() if cur.description else []


def _comment(schema: str) -> str | None:
    rows = _execute("SELECT obj_description(oid, 'pg_namespace') FROM pg_namespace "
                    "WHERE nspname = %s", (schema,))
    return None if not rows else rows[0][0] or ""


def _exists(schema: str) -> bool:
    return bool(_execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)))


@pytest.fixture
def schema() -> Iterator[str]:
    """A schema name no one uses; it and its _raw and _workers neighbours are dropped after."""
    require_postgres()
    name = f"hailq_bt_{uuid.uuid4().hex[:12]}"
    yield name
    for suffix in ("", "_raw", "_workers"):
        _execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
            sql.Identifier(name + suffix)))


def _users_schema(name: str) -> None:
    """A schema as an application would have it: its own table, with a row."""
    ident = sql.Identifier(name)
    _execute(sql.SQL("CREATE SCHEMA {}").format(ident))
    _execute(sql.SQL("CREATE TABLE {}.claims (id int PRIMARY KEY)").format(ident))
    _execute(sql.SQL("INSERT INTO {}.claims VALUES (8311)").format(ident))


def _claims(name: str) -> list[tuple]:
    return _execute(sql.SQL("SELECT id FROM {}.claims").format(sql.Identifier(name)))


def test_bench_refuses_a_schema_it_did_not_create_and_leaves_it_as_it_was(
        schema: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    _users_schema(schema)
    code = run(["bench", "--no-sqlite", "--postgres", _url(schema), "--only", "send",
                "--quick", "--runs", "1", "--json", str(tmp_path / "bench.json")])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("hailq: error: ")
    assert f"schema {schema} exists and was not created by hailq bench" in err
    assert "?schema=" in err and "changed nothing" in err
    assert _claims(schema) == [(8311,)]  # the table and its row are still there
    assert _comment(schema) == ""  # not marked either
    assert not _exists(schema + "_raw") and not _exists(schema + "_workers")
    assert not (tmp_path / "bench.json").exists()  # nothing was measured


def test_an_unmarked_neighbour_is_refused_and_nothing_is_created(schema: str) -> None:
    """The check covers the _raw and _workers schemas too, and comes before any change:
    the named schema, which does not exist, is not created either."""
    from hailq.bench.scratch import NotBenchSchema, prepare_schemas

    _users_schema(schema + "_workers")
    with pytest.raises(NotBenchSchema, match=f"schema {schema}_workers exists"):
        prepare_schemas(_url(schema))
    assert _claims(schema + "_workers") == [(8311,)]
    assert not _exists(schema) and not _exists(schema + "_raw")


def test_an_empty_schema_it_did_not_create_is_refused_too(schema: str) -> None:
    """An empty schema may be one an application is about to use (a fresh ``hailq``
    schema before its first send): without the mark it is not the benchmark's."""
    import hailq
    from hailq.bench.scratch import NotBenchSchema, prepare_schemas

    _execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    with pytest.raises(NotBenchSchema) as refused:
        prepare_schemas(_url(schema))
    assert isinstance(refused.value, hailq.InvalidArgument)  # exit 2 under the CLI
    assert _comment(schema) == ""


def test_without_a_schema_the_bench_uses_its_own_default_never_hailq() -> None:
    from hailq.bench.command import DEFAULT_PG, workers_url
    from hailq.bench.scratch import DEFAULT_SCHEMA, bench_url, schema_of, scratch_schemas
    from hailq.url import parse_url

    assert DEFAULT_SCHEMA == "hailq_bench"
    given = "postgresql://postgres@127.0.0.1:5432/test"
    assert bench_url(given) == given + "?schema=hailq_bench"
    assert bench_url(given + "?sslmode=disable") == given + "?sslmode=disable&schema=hailq_bench"
    assert bench_url("postgresql:///test") == "postgresql:///test?schema=hailq_bench"
    assert scratch_schemas(bench_url(given)) == ["hailq_bench", "hailq_bench_raw",
                                                 "hailq_bench_workers"]
    assert parse_url(DEFAULT_PG).options["schema"] != "hailq"
    assert "hailq" not in scratch_schemas(bench_url(DEFAULT_PG))
    assert workers_url(bench_url(given)).endswith("?schema=hailq_bench_workers")
    with pytest.raises(ValueError, match=r"\?schema="):
        schema_of(given)  # the benchmark's parts never fall back on hailq's default
    assert bench_url("sqlite:///tmp/x.db") == "sqlite:///tmp/x.db"


def test_a_schema_name_with_no_room_for_its_neighbours_is_refused() -> None:
    from hailq.bench.scratch import bench_url

    assert bench_url(_url("b" * 55)) == _url("b" * 55)
    with pytest.raises(ValueError, match="too long"):
        bench_url(_url("b" * 56))  # b..._workers would be cut short by PostgreSQL
    with pytest.raises(ValueError, match="invalid PostgreSQL schema name"):
        bench_url(_url("Bench"))


def test_a_new_schema_is_created_marked_and_a_second_run_starts_it_afresh(
        schema: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from hailq.bench.scratch import prepare_schemas

    names = prepare_schemas(_url(schema))
    assert names == [schema, schema + "_raw", schema + "_workers"]
    assert [_comment(n) for n in names] == [SCRATCH_MARK] * 3
    _execute(sql.SQL("CREATE TABLE {}.left_over (x int)").format(sql.Identifier(schema)))

    out = tmp_path / "bench.json"
    code = run(["bench", "--no-sqlite", "--postgres", _url(schema), "--only", "send",
                "--quick", "--runs", "1", "--json", str(out)])
    assert code == 0, capsys.readouterr().err
    assert [_comment(n) for n in names] == [SCRATCH_MARK] * 3  # dropped, made and marked
    assert not _execute("SELECT to_regclass(%s)", (f"{schema}.left_over",))[0][0]
    sends = json.loads(out.read_text())["backends"]["postgresql"]
    assert [f["name"] for f in sends] == [
        "send, one by one", "send, one by one (vs a bare insert of the same row)",
        "send, batches of 100"]
