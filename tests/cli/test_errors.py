"""Bad input: one clean error line, a non-zero exit, no traceback, nothing written."""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import hailq

from .conftest import Hailq, run_hailq

PASSWORD = "s3cret-Pa55"


def test_bad_queue_name_writes_nothing(hq: Hailq, tmp_path: Path) -> None:
    line = hq("send", "--create", "no spaces", "1").assert_clean_error()
    assert "queue name" in line and "'no spaces'" in line
    assert not (tmp_path / "hailq.db").exists()


def test_bad_priority_writes_nothing(hq: Hailq, tmp_path: Path) -> None:
    line = hq("send", "--create", "claims", "1", "--priority", "10").assert_clean_error()
    assert "--priority" in line and "0<=x<=9" in line
    hq("send", "--create", "claims", "1", "--priority", "high").assert_clean_error()
    assert not (tmp_path / "hailq.db").exists()


def test_bad_delay_and_header_are_refused(hq: Hailq) -> None:
    hq("send", "--create", "claims", "1", "--delay", "-5").assert_clean_error()
    line = hq("send", "--create", "claims", "1", "-H", "no-equals-sign").assert_clean_error()
    assert "NAME=VALUE" in line


def test_invalid_message_declares_no_queue(hq: Hailq) -> None:
    hq("send", "--create", "other", "1")
    line = hq("send", "--create", "claims", "1", "--ordering-key", "k" * 300).assert_clean_error()
    assert "ordering_key" in line
    assert [q["queue"] for q in hq("queues", "--json").json()] == ["other"]


def test_body_that_is_not_json_is_explained(hq: Hailq) -> None:
    line = hq("send", "--create", "claims", "hello").assert_clean_error()
    assert "not valid JSON" in line and "--text" in line and "--raw" in line


@pytest.mark.parametrize("bad", ["mysql://db/x", "sqlite://", "sqlite:///x.db?colour=red",
                                 "not a url"])
def test_bad_url(bad: str, tmp_path: Path) -> None:
    run_hailq("send", "--create", "claims", "1", url=bad, cwd=tmp_path).assert_clean_error()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", [["peek", "ghost"], ["dead", "ghost"], ["stats", "ghost"],
                                     ["redrive", "ghost"], ["purge", "ghost", "--yes"],
                                     ["redrive", "ghost", "--dry-run"]])
def test_unknown_queue_is_named_not_created(hq_any: Hailq, api_any: hailq.Broker,
                                            command: list[str]) -> None:
    api_any.queue("real")
    line = hq_any(*command).assert_clean_error()
    assert "no queue named 'ghost'" in line
    assert [q.name for q in api_any.queues()] == ["real"]


def test_unknown_topic_is_named_not_created(hq: Hailq, api: hailq.Broker) -> None:
    line = hq("publish", "ghost", "1").assert_clean_error()
    assert "no topic named 'ghost'" in line
    assert api.topics() == []


def test_read_commands_do_not_create_a_missing_database(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'typo.db'}"
    for command in (["queues"], ["peek", "claims"], ["workers"], ["topics"]):
        line = run_hailq(*command, url=url).assert_clean_error()
        assert "no hailq database" in line
    assert list(tmp_path.iterdir()) == []


def test_password_never_shows_in_errors() -> None:
    urls = [f"postgresql://hailq:{PASSWORD}@127.0.0.1:5432/db?pool_size=lots",
            f"postgresql://hailq:{PASSWORD}@127.0.0.1:5432/db?pool_size=0",
            f"postgresql://hailq@127.0.0.1:5432/db?password={PASSWORD}&pool_size=0",
            f"postgresql://hailq@127.0.0.1:5432/db?password={PASSWORD}&colour=red",
            f"postgresql://hailq@127.0.0.1:5432/db?password={PASSWORD}%zz",
            f"mysql://hailq:{PASSWORD}@127.0.0.1/db"]
    for url in urls:
        for command in (["queues"], ["send", "--create", "claims", "1"], ["peek", "bad name"]):
            result = run_hailq(*command, url=url)
            result.assert_clean_error()
            assert PASSWORD not in result.err + result.out
        result = run_hailq("queues", env={"HAILQ_URL": url})
        result.assert_clean_error()
        assert PASSWORD not in result.err


@pytest.mark.slow
def test_password_never_shows_when_the_server_is_unreachable() -> None:
    url = f"postgresql://hailq:{PASSWORD}@127.0.0.1:1/db"
    result = run_hailq("queues", url=url, timeout=240)
    line = result.assert_clean_error()
    assert PASSWORD not in result.err
    assert "hailq:***@127.0.0.1:1" in line


def test_every_command_has_help(hq: Hailq) -> None:
    listing = hq("--help")
    assert listing.code == 0
    for command in ("send", "queues", "stats", "peek", "dead", "redrive", "purge", "topics",
                    "subscribe", "publish", "workers", "maintain", "migrate", "pause",
                    "resume", "configure", "delete", "delete-topic", "unsubscribe", "show",
                    "delete-message"):
        assert command in listing.out
        result = hq(command, "--help")
        assert result.code == 0, result.err
        assert "--url" in result.out and "--json" in result.out
        assert len(result.out.splitlines()) > 5


def test_unknown_command_and_option(hq: Hailq) -> None:
    assert "No such command" in hq("sned", "q", "1").assert_clean_error()
    assert "--frobnicate" in hq("queues", "--frobnicate").assert_clean_error()


def test_url_from_environment_and_default(tmp_path: Path) -> None:
    env_db = tmp_path / "env.db"
    assert run_hailq("send", "--create",
                     "claims", "1", env={"HAILQ_URL": f"sqlite:///{env_db}"}).code == 0
    assert env_db.exists()
    # --url wins over HAILQ_URL, before or after the command name.
    flag_db = tmp_path / "flag.db"
    run_hailq("--url", f"sqlite:///{flag_db}", "send", "--create", "a", "1",
              env={"HAILQ_URL": f"sqlite:///{env_db}"})
    assert flag_db.exists()
    # Without either: sqlite:///hailq.db in the working directory.
    assert run_hailq("send", "--create", "claims", "1", cwd=tmp_path).code == 0
    assert (tmp_path / "hailq.db").exists()


def test_json_before_or_after_the_command(hq: Hailq) -> None:
    hq("send", "--create", "claims", "1")
    before = hq("--json", "queues").json()
    after = hq("queues", "--json").json()
    assert [q["queue"] for q in before] == [q["queue"] for q in after] == ["claims"]


# 2: bad input, refused before anything was done; 1: a failure while doing it.
EXIT_CODES = [
    (["send", "--create", "no spaces", "1"], 2, "queue name"),
    (["send", "--create", "claims", "1", "--priority", "10"], 2, "--priority"),
    (["send", "--create", "claims", "hello"], 2, "not valid JSON"),
    (["send", "--create", "claims", "1", "--ordering-key", "k" * 300], 2, "ordering_key"),
    (["send", "--create", "claims"], 2, "BODY or --file"),
    (["sned", "claims", "1"], 2, "No such command"),
    (["queues", "--frobnicate"], 2, "--frobnicate"),
    (["stats", "--count", "2"], 2, "--watch"),
    (["purge", "claims"], 2, "pass --yes"),
    (["worker", "not-a-target"], 2, "module:function"),
    (["worker", "no_such_module_here:app"], 2, "cannot import module"),
    (["peek", "ghost"], 1, "no queue named 'ghost'"),
    (["dead", "ghost"], 1, "no queue named 'ghost'"),
    (["publish", "ghost", "1"], 1, "no topic named 'ghost'"),
]


@pytest.mark.parametrize(("args", "code", "says"), EXIT_CODES,
                         ids=[" ".join(a)[:30] for a, _, _ in EXIT_CODES])
def test_exit_code_is_2_for_bad_input_and_1_for_a_failure(
        hq: Hailq, api: hailq.Broker, args: list[str], code: int, says: str) -> None:
    api.queue("claims").send(1)
    assert says in hq(*args).assert_clean_error(code)


@pytest.mark.parametrize(("url", "code", "says"), [
    ("mysql://db/x", 2, "unsupported broker URL"),
    ("sqlite:///x.db?colour=red", 2, "unknown sqlite URL option"),
    ("postgresql://postgres@127.0.0.1:5432/test?pool_size=lots", 2, "pool_size"),
    ("postgresql://postgres@127.0.0.1:5432/test?colour=red", 2, "invalid URI query parameter"),
    ("postgresql://postgres@127.0.0.1:5432/test?sslmode=sometimes", 1, "sslmode"),
    ("sqlite:///missing.db", 1, "no hailq database"),
    ("sqlite:///junk.db", 1, "not a database"),
    ("postgresql://postgres@127.0.0.1:1/test", 1, "connection failed"),
])
def test_a_bad_url_exits_2_and_a_database_that_fails_exits_1(
        url: str, code: int, says: str, tmp_path: Path) -> None:
    (tmp_path / "junk.db").write_text("not a database, only text " * 10)
    assert says in run_hailq("queues", url=url, cwd=tmp_path).assert_clean_error(code)


def test_an_unknown_scheme_lists_the_schemes_hailq_knows(tmp_path: Path) -> None:
    line = run_hailq("queues", url="redis://cache:6379/0", cwd=tmp_path).assert_clean_error(2)
    assert "unsupported broker URL 'redis://cache:6379/0'" in line
    assert "the schemes hailq knows are postgres, postgresql, sqlite" in line
    with pytest.raises(hailq.InvalidArgument, match="postgres, postgresql, sqlite"):
        hailq.connect("mysql://db/x")
    assert list(tmp_path.iterdir()) == []


def _foreign_database(path: Path) -> None:
    """Another application's SQLite file, in the default rollback-journal mode."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, total REAL)")
        conn.execute("INSERT INTO orders (total) VALUES (9.5)")
        conn.commit()


@pytest.mark.parametrize("command", [["queues"], ["stats"], ["peek", "claims"],
                                     ["dead", "claims"], ["topics"], ["workers"]])
def test_a_read_command_on_another_applications_database_changes_nothing(
        tmp_path: Path, command: list[str]) -> None:
    path = tmp_path / "shop.db"
    _foreign_database(path)
    before = path.read_bytes()
    line = run_hailq(*command, url=f"sqlite:///{path}").assert_clean_error(1)
    assert "no hailq schema" in line and "hailq migrate" in line
    assert path.read_bytes() == before  # no hailq tables, still not in WAL mode
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shop.db"]


def test_a_read_command_on_a_mistyped_postgres_schema_creates_nothing(pg_url: str) -> None:
    import psycopg

    server, schema = pg_url.rsplit("schema=", 1)
    for command in (["queues"], ["dead", "claims"], ["workers"]):
        line = run_hailq(*command, url=pg_url).assert_clean_error(1)
        assert "no hailq schema" in line
    with psycopg.connect(server.rstrip("?&")) as conn:
        found = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s",
                             (schema,)).fetchall()
    assert found == []
    # A command that writes creates the schema as before.
    assert run_hailq("send", "--create", "claims", "1", url=pg_url).code == 0
    assert run_hailq("queues", url=pg_url).code == 0


def test_an_empty_url_is_refused_not_replaced_by_the_default(tmp_path: Path) -> None:
    env_db = tmp_path / "env.db"
    for env in ({}, {"HAILQ_URL": f"sqlite:///{env_db}"}):
        result = run_hailq("send", "--create", "claims", "1", url="", cwd=tmp_path, env=env)
        assert "broker URL is empty" in result.assert_clean_error(2)
    result = run_hailq("send", "--create", "claims", "1", cwd=tmp_path, env={"HAILQ_URL": ""})
    line = result.assert_clean_error(2)
    assert "broker URL is empty" in line and "HAILQ_URL" in line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args", [["send", "--create", "claims", "1", "--delay", "nan"],
                                  ["send", "--create", "claims", "1", "--delay", "inf"],
                                  ["stats", "claims", "--watch", "--interval", "nan"],
                                  ["dead", "claims", "--older-than", "nan"],
                                  ["redrive", "claims", "--older-than", "inf"]])
def test_a_number_that_is_not_finite_is_refused(hq: Hailq, api: hailq.Broker,
                                                args: list[str]) -> None:
    api.queue("claims")
    assert "not a finite number" in hq(*args).assert_clean_error(2)
    assert api.get_queue("claims").stats().ready == 0


def test_libpq_options_reach_the_server_as_written(pg_url: str) -> None:
    import psycopg

    name = "hailq cli & tests"  # a space and an ampersand, percent-encoded in the URL
    url = f"{pg_url}&application_name=hailq%20cli%20%26%20tests"
    assert run_hailq("send", "--create", "claims", "1", url=url).code == 0
    server = pg_url.rsplit("schema=", 1)[0].rstrip("?&")
    with hailq.connect(url) as broker, psycopg.connect(server) as conn:
        broker.get_queue("claims").stats()  # a pooled connection is open now
        names = [r[0] for r in conn.execute("SELECT application_name FROM pg_stat_activity")]
    assert name in names


def test_a_read_command_leaves_another_applications_wal_file_as_it_was(
        tmp_path: Path) -> None:
    """An application killed with writes still in its WAL: the next read-write
    connection to close would checkpoint them into the database file."""
    path = tmp_path / "shop.db"
    subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        import os, sqlite3
        conn = sqlite3.connect({str(path)!r}, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA wal_autocheckpoint=0")
        conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, total REAL)")
        conn.execute("INSERT INTO orders (total) VALUES (9.5)")
        os._exit(0)
    """)], check=True)
    before = path.read_bytes()
    assert (tmp_path / "shop.db-wal").stat().st_size > 0
    line = run_hailq("stats", url=f"sqlite:///{path}").assert_clean_error(1)
    assert "no hailq schema" in line
    assert path.read_bytes() == before
    assert (tmp_path / "shop.db-wal").stat().st_size > 0  # the writes still wait there


def test_a_read_command_does_not_upgrade_an_older_schema(hq: Hailq, api: hailq.Broker,
                                                         sqlite_url: str) -> None:
    latest = api.schema_status()[1]
    api.queue("claims").send(1)
    path = sqlite_url.removeprefix("sqlite:///")
    with contextlib.closing(sqlite3.connect(path)) as conn:  # as an older hailq left it
        conn.execute("DELETE FROM hailq_schema WHERE version = ?", (latest,))
        conn.commit()
    for command in (["queues"], ["stats", "claims"], ["peek", "claims"]):
        line = hq(*command).assert_clean_error(1)
        assert f"is version {latest - 1}, this hailq needs {latest}" in line
        assert "hailq migrate" in line
    assert api.schema_status()[0] == latest - 1  # nobody upgraded it


def test_a_url_of_bytes_that_are_not_utf8_is_bad_input(tmp_path: Path) -> None:
    line = run_hailq("queues", url="sqlite:///caf\udce9.db", cwd=tmp_path).assert_clean_error(2)
    assert "not valid text" in line
    assert list(tmp_path.iterdir()) == []


def test_a_postgres_url_without_a_host_part_takes_libpq_options(pg_url: str) -> None:
    from urllib.parse import urlsplit

    parts = urlsplit(pg_url)  # the same server, named in query options instead
    schema = pg_url.rsplit("schema=", 1)[1]
    url = (f"postgresql://{parts.path}?host={parts.hostname}&port={parts.port or 5432}"
           f"&user={parts.username}&schema={schema}")
    assert run_hailq("send", "--create", "claims", "1", url=url).code == 0
    with hailq.connect(pg_url) as broker:
        assert broker.get_queue("claims").stats().ready == 1
