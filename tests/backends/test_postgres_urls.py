"""PostgreSQL URLs: multi-host failover URLs, pooler and listen options, deadlines.

hailq passes a libpq URL on as it is, several hosts included, and adds its own
options on top: ``timeout`` (rule 31's bound on every call), ``pooler``,
``prepare`` and ``listen`` (for PgBouncer). Every bad value is refused before
anything connects (rule 27), and the bounds on connecting and on dead peers
(libpq's ``connect_timeout``, TCP keepalives, ``tcp_user_timeout``) are set
unless the URL sets them itself.
"""

from __future__ import annotations

import socket
import time
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

import hailq
from hailq.backends.postgres.backend import PostgresDialect
from hailq.backends.registry import _postgres_settings
from hailq.errors import InvalidArgument
from hailq.url import parse_url, redact


def _closed_port() -> int:
    """A loopback port nobody listens on: connecting is refused at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _two_hosts(pg_url: str, first_port: int) -> str:
    """``pg_url`` with a host that is down before the real one, libpq's multi-host form."""
    parts = urlsplit(pg_url)
    user = f"{parts.username}@" if parts.username else ""
    netloc = f"{user}127.0.0.1:{first_port},{parts.hostname}:{parts.port or 5432}"
    query = f"{parts.query}&target_session_attrs=read-write"
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def test_rule_31_a_multi_host_url_is_accepted_and_passed_on_to_libpq() -> None:
    parsed = parse_url("postgresql://hailq:secret@db1:5432,db2:5433/claims"
                       "?target_session_attrs=read-write&schema=claims&timeout=10")
    target = conninfo_to_dict(parsed.target)
    assert target["host"] == "db1,db2" and target["port"] == "5432,5433"
    assert target["target_session_attrs"] == "read-write"
    assert "schema" not in target and "timeout" not in target  # hailq's, not libpq's
    assert parsed.options == {"schema": "claims", "timeout": "10"}
    assert "secret" not in parsed.display and "db1:5432,db2:5433" in parsed.display


def test_rule_31_connect_with_two_hosts_whose_first_is_down_uses_the_second(
        pg_url: str) -> None:
    url = _two_hosts(pg_url, _closed_port())
    with hailq.connect(url) as broker:
        q = broker.queue("failover")
        sent = q.send({"claim": 1})
        [m] = q.receive()
        assert m.id == sent
        m.ack()
        assert q.stats().ready == 0


@pytest.mark.parametrize(("option", "hint"), [
    ("timeout=0", "timeout"), ("timeout=abc", "timeout"), ("timeout=0.5", "at least 1"),
    ("pooler=pgbouncer", "pooler"), ("prepare=maybe", "prepare"),
    ("pooler=transaction&prepare=on", "prepare=on"),
    ("pooler=transaction&listen=on", "listen=on"),
    ("listen=mysql://db/x", "listen"), ("listen=sometimes", "listen"),
    ("listen=postgresql://db/x%3Fschema%3Dother", "libpq's options only"),
    ("listen=postgresql://db/x%3Fbogus%3D1", "bogus"),
    ("connect_timeout=0", "connect_timeout"), ("connect_timeout=-5", "connect_timeout"),
], ids=repr)
def test_rule_27_bad_pooler_listen_and_deadline_options_are_refused_before_connecting(
        option: str, hint: str) -> None:
    # Port 1 on loopback: anything that tried to connect would fail differently.
    with pytest.raises(InvalidArgument, match=hint):
        hailq.connect(f"postgresql://nobody@127.0.0.1:1/db?{option}")


def test_pooler_transaction_turns_prepared_statements_and_listen_off_by_default() -> None:
    def settings(query: str) -> dict[str, Any]:
        return _postgres_settings(parse_url(f"postgresql://u@pgbouncer:6432/db?{query}"))

    through = settings("pooler=transaction")
    assert (through["prepare"], through["listen"]) == (False, None)
    direct = "postgresql://u@db:5432/db"
    given = settings(f"pooler=transaction&listen={quote(direct, safe='')}")
    assert (given["prepare"], given["listen"]) == (False, direct)
    for plain in ("", "pooler=session", "pooler=none"):
        assert (settings(plain)["prepare"], settings(plain)["listen"]) == (True, "")
    assert settings("listen=off&prepare=off")["listen"] is None
    assert settings("")["timeout"] == 30.0 and settings("timeout=2.5")["timeout"] == 2.5


def test_rule_29_a_password_in_the_listen_url_never_shows() -> None:
    url = ("postgresql://app:outer@pgbouncer:6432/db?pooler=transaction&listen="
           + quote("postgresql://app:inner@db:5432/db", safe=""))
    shown = redact(url)
    assert "outer" not in shown and "inner" not in shown
    assert "db:5432" in shown
    assert "inner" not in parse_url(url).display


def test_rule_31_keepalives_and_bounded_connects_are_set_unless_the_url_says(
        pg_url: str) -> None:
    base = pg_url.split("?")[0]
    dialect = PostgresDialect(base, display="test", timeout=12)
    mine = conninfo_to_dict(dialect._conninfo)
    assert mine["keepalives"] == "1" and int(str(mine["keepalives_idle"])) > 0
    assert mine["tcp_user_timeout"] == "12000" and mine["connect_timeout"] == "5"
    # What libpq really uses on a connection made from it:
    with psycopg.connect(dialect._conninfo) as conn:
        used = conninfo_to_dict(conn.info.dsn)
    assert used["keepalives"] == "1" and used["tcp_user_timeout"] == "12000"

    theirs = PostgresDialect(f"{base}?keepalives_idle=99&connect_timeout=3&tcp_user_timeout=0",
                             display="test", timeout=12)
    kept = conninfo_to_dict(theirs._conninfo)
    assert (kept["keepalives_idle"], kept["connect_timeout"], kept["tcp_user_timeout"]) == (
        "99", "3", "0")
    dialect.close()
    theirs.close()


def test_rule_31_an_unreachable_host_fails_within_the_connect_timeout() -> None:
    # A listening socket that never accepts: the TCP handshake completes (the kernel's
    # backlog), the server's answer never comes, as with a stopped server.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        t0 = time.monotonic()
        with pytest.raises(hailq.StorageError) as caught:
            hailq.connect(f"postgresql://postgres@127.0.0.1:{port}/db?timeout=2")
        took = time.monotonic() - t0
    assert took < 6, took
    assert "timeout" in str(caught.value)
