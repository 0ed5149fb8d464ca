"""Both dialects' ``queries.sql`` name the same statements, one for one.

``backends/core.py`` runs every step by statement name, so a name that one
dialect has and the other lacks is either a missing statement or a real
dialect-only step. The real ones are listed below, and each says in its own
comment (the ``--`` lines right under its ``-- name:`` line) that it is
"SQLite only" or "PostgreSQL only", and why: a reader of one file then knows
why the other file has no such statement.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hailq.backends.sqlfile import load_queries

DIALECTS = ("sqlite", "postgres")
PACKAGES = {d: f"hailq.backends.{d}" for d in DIALECTS}
FILES = {d: Path(__file__).resolve().parents[2] / "src" / "hailq" / "backends" / d
         / "queries.sql" for d in DIALECTS}
# How a dialect-only statement's comment names its dialect.
SPOKEN = {"sqlite": "SQLite", "postgres": "PostgreSQL"}

# Statements one dialect has and the other has not, each with its reason in its comment.
DIALECT_ONLY: dict[str, frozenset[str]] = {
    "sqlite": frozenset({
        "claimable",  # a cheap read between waits; PostgreSQL is woken by NOTIFY
        "count_late",  # the count_* statements: PostgreSQL counts inside the
        "count_nacked",  # statement that changed the rows (a data-modifying WITH)
        "count_redelivered",
        "count_sent",
        "count_sent_priority",
        "message_ack_claim_in_time",  # fast paths without RETURNING
        "message_ack_in_time",
        "key_release_acked",  # their keys' release, before the delete: no RETURNING
        "keys_release_acked",
        "message_ack_pairs",  # receipts from before receipts named the row's position
        "message_insert_rows",  # many rows in one statement; PostgreSQL's takes arrays
        "message_claim_mark",  # the second half of SQLite's claim
        "message_claim_mark_retain",  # the same, of a queue that keeps history (rule 40)
        "message_claim_mark_slots",  # the same, naming each row's worker slot (rule 40)
        "fence_take",  # its fencing tokens; PostgreSQL's claim draws them from a sequence
        "queue_order",  # a send's aging and targets; PostgreSQL's insert joins the row
        "history_fresh_top",  # retained acks' unindexed history rows, moved in batches:
        "history_settle",  # PostgreSQL's ack statements write history in place
        "history_settled",
    }),
    "postgres": frozenset({
        "clock_now",  # the database's clock (rule 11); SQLite's is the process's
        "in_flight_lock",  # SQLite has one writer at a time
        "keys_lock",  # the same
        "message_ack_claim",  # acks and a claim in one round trip
        "messages_present",  # after a lost connection, what the first try did
        "wait_begin",  # SQLite looks with claimable instead
        "message_insert_one",  # SQLite has no plan to keep generic
        "message_ack_plain",  # SQLite has no round trips to save
        "queue_lock",  # a declaration and an operator's change take turns; SQLite's
        # single writer does that already
        "overview_plan",  # JIT off for the overview's one statement; SQLite has no JIT
        "deadline_pool_save",  # the desired_workers view reads them; SQLite has no view
    }),
}

_NAME_LINE = re.compile(r"^-- name: ([a-z_]+)\s*$")
_ONLY = {d: re.compile(rf"\b{SPOKEN[d]} only\b", re.IGNORECASE) for d in DIALECTS}
_ANY_ONLY = re.compile(r"\b(SQLite|PostgreSQL) only\b", re.IGNORECASE)
_WORD = re.compile(r"[A-Za-z]{2,}")
REASON_WORDS = 3  # a reason is more than the phrase itself


def statement_names(dialect: str) -> set[str]:
    """The statement names of a dialect, as the backends load them."""
    return set(load_queries(PACKAGES[dialect]))


def own_comments(dialect: str) -> dict[str, str]:
    """Per statement, its own comment: the ``--`` lines right under its ``-- name:`` line,
    without the dashes, joined by spaces (empty when it has none)."""
    comments: dict[str, str] = {}
    name: str | None = None
    lines: list[str] = []
    for line in FILES[dialect].read_text(encoding="utf-8").splitlines():
        match = _NAME_LINE.match(line)
        if match:
            name, lines = match.group(1), []
            comments[name] = ""
        elif name is not None and line.startswith("--"):
            lines.append(line[2:].strip())
            comments[name] = " ".join(lines)
        else:
            name = None
    return comments


def reason_after_only(dialect: str, comment: str) -> str | None:
    """What the comment says after "<dialect> only"; None if it does not say it."""
    match = _ONLY[dialect].search(comment)
    return None if match is None else comment[match.end():]


def test_both_dialects_name_the_same_statements_apart_from_the_listed_ones() -> None:
    sqlite, postgres = statement_names("sqlite"), statement_names("postgres")

    only_sqlite = sqlite - postgres - DIALECT_ONLY["sqlite"]
    only_postgres = postgres - sqlite - DIALECT_ONLY["postgres"]

    assert not only_sqlite, (
        f"only SQLite has {sorted(only_sqlite)}: add them to PostgreSQL's queries.sql, or "
        "list them in DIALECT_ONLY with a 'SQLite only: why' comment")
    assert not only_postgres, (
        f"only PostgreSQL has {sorted(only_postgres)}: add them to SQLite's queries.sql, or "
        "list them in DIALECT_ONLY with a 'PostgreSQL only: why' comment")
    assert sqlite - DIALECT_ONLY["sqlite"] == postgres - DIALECT_ONLY["postgres"]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_listed_dialect_only_statement_exists_in_its_dialect_alone(dialect: str) -> None:
    other = next(d for d in DIALECTS if d != dialect)
    names = statement_names(dialect)

    stale = DIALECT_ONLY[dialect] - names
    shared = DIALECT_ONLY[dialect] & statement_names(other)

    assert not stale, f"DIALECT_ONLY[{dialect!r}] lists {sorted(stale)}, which it does not have"
    assert not shared, (f"DIALECT_ONLY[{dialect!r}] lists {sorted(shared)}, which {other} has "
                        "too: they are shared statements now")


def test_the_comments_are_read_from_the_same_sections_the_loader_finds() -> None:
    for dialect in DIALECTS:
        assert set(own_comments(dialect)) == statement_names(dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_each_dialect_only_statement_says_why_in_its_own_comment(dialect: str) -> None:
    comments = own_comments(dialect)
    unexplained = []
    for name in sorted(DIALECT_ONLY[dialect]):
        reason = reason_after_only(dialect, comments.get(name, ""))
        if reason is None or len(_WORD.findall(reason)) < REASON_WORDS:
            unexplained.append(name)

    assert not unexplained, (
        f"in {dialect}/queries.sql these dialect-only statements need a comment of their "
        f"own, right under their '-- name:' line, saying '{SPOKEN[dialect]} only: <why>': "
        f"{', '.join(unexplained)}")


@pytest.mark.parametrize("dialect", DIALECTS)
def test_no_shared_statement_calls_itself_dialect_only(dialect: str) -> None:
    comments = own_comments(dialect)
    claiming = sorted(name for name, text in comments.items()
                      if name not in DIALECT_ONLY[dialect] and _ANY_ONLY.search(text))

    assert not claiming, (f"{dialect}/queries.sql: {claiming} say they are dialect-only, but "
                          "both dialects have them")


def test_the_reason_check_tells_a_reason_from_a_bare_phrase() -> None:
    assert reason_after_only("sqlite", "SQLite only: it has no data-modifying WITH.")
    assert reason_after_only("postgres", "postgresql ONLY (SQLite has one writer at a time)")
    assert reason_after_only("sqlite", "the common ack, without RETURNING") is None
    assert reason_after_only("sqlite", "PostgreSQL only: woken by NOTIFY") is None
    bare = reason_after_only("sqlite", "SQLite only.")
    assert bare is not None and len(_WORD.findall(bare)) < REASON_WORDS


@pytest.mark.parametrize("dialect", DIALECTS)
def test_parts_expand_fully_and_shared_sql_is_written_once(dialect: str) -> None:
    """Every ``{part}`` and ``{part(args)}`` is expanded (no ``$1`` left over, no part's
    own comment carried in), and SQL both dialects write alike is in shared.sql, used
    by both."""
    queries = load_queries(PACKAGES[dialect])
    shared = (FILES[dialect].parents[1] / "shared.sql").read_text(encoding="utf-8")
    names = re.findall(r"^-- part: ([a-z_]+)", shared, re.MULTILINE)
    assert names
    text = FILES[dialect].read_text(encoding="utf-8")
    for name in names:
        assert "{" + name in text, f"{dialect} does not use shared part {name}"
    for name, sql in queries.items():
        assert not re.search(r"\$\d", sql), f"{name}: an argument left unexpanded"
        assert not re.search(r"\{[a-z_]+\(", sql), f"{name}: a part left unexpanded"
    assert "excluded.retain_bodies" in queries["queue_save"]
    assert "WHERE id =" in queries["history_by_id"].replace("\n", " ")
