"""The PostgreSQL schemas ``hailq bench`` measures in: its own, and only its own (rule 30).

The benchmark empties what it measures, so it works only in schemas it created
itself. It marks each one when it creates it, with a comment on the schema::

    COMMENT ON SCHEMA hailq_bench IS 'hailq bench scratch schema'

and before it drops one (to start from empty) it checks that comment. A schema
that exists without it, such as hailq's production schema ``hailq``, ``public``,
or a scratch schema an older hailq bench left unmarked, is refused with
``NotBenchSchema`` before anything is dropped or written. A comment and not a
marker table, because a table would make the schema one that hailq's own
migration refuses to install into (it installs only into empty schemas).

A URL without ``?schema=`` measures in ``hailq_bench`` (never in ``hailq``, the
schema a broker uses by default). Beside the named schema the benchmark uses
two more: the name + ``_raw`` (the bare-driver baseline) and + ``_workers``
(the worker figures). All three are checked, then all three dropped and
created anew, in one transaction.
"""

from __future__ import annotations

from hailq.errors import InvalidArgument
from hailq.url import parse_url

MARK = "hailq bench scratch schema"
"""The comment that marks a schema as one ``hailq bench`` created."""

DEFAULT_SCHEMA = "hailq_bench"
"""The schema a ``--postgres`` URL without ``?schema=`` measures in."""

SUFFIXES = ("", "_raw", "_workers")
"""The schemas of one benchmark: the named one and two more beside it."""

_LONGEST = 63 - max(len(s) for s in SUFFIXES)  # PostgreSQL cuts longer names short


class NotBenchSchema(InvalidArgument):
    """A schema the benchmark would empty exists and is not one it created.

    Raised before anything was dropped or written; the message names the schema
    and says to pass ``?schema=`` naming a new one.
    """


def bench_url(url: str) -> str:
    """``url`` with the schema the benchmark measures in made explicit.

    A PostgreSQL URL without ``?schema=`` gets ``?schema=hailq_bench``; a SQLite URL
    is returned as given. InvalidArgument if the URL is unusable or its schema name
    leaves no room for the ``_workers`` beside it.
    """
    parsed = parse_url(url)
    if parsed.scheme != "postgresql":
        return url
    from hailq.backends.postgres.backend import SCHEMA_PATTERN  # needs the PostgreSQL driver

    schema = parsed.options.get("schema")
    if schema is None:
        # Appended to the text: the rest stays as written (urlunsplit would turn an
        # empty host, postgresql:///db, into postgresql:/db).
        head, hash_, fragment = url.partition("#")
        sep = "&" if "?" in head else "?"
        return f"{head}{sep}schema={DEFAULT_SCHEMA}{hash_}{fragment}"
    if not SCHEMA_PATTERN.fullmatch(schema):
        raise InvalidArgument(
            f"invalid PostgreSQL schema name {schema!r}: use 1-63 characters from "
            "a-z 0-9 _, starting with a letter or _")
    if len(schema) > _LONGEST:
        raise InvalidArgument(
            f"PostgreSQL schema name {schema!r} is too long for hailq bench: it also uses "
            f"{schema}_workers, and PostgreSQL names stop at 63 characters; give "
            f"?schema= a name of at most {_LONGEST}")
    return url


def schema_of(url: str) -> str:
    """The schema a benchmark PostgreSQL URL names.

    The benchmark's URLs always name it (``bench_url`` sees to that), so that no
    part of the benchmark falls back on a broker's default schema; InvalidArgument
    for a URL that does not.
    """
    schema = parse_url(url).options.get("schema")
    if schema is None:
        raise InvalidArgument("hailq bench measures only in a schema named by ?schema= "
                              "(bench_url adds its default, hailq_bench)")
    return schema


def scratch_schemas(url: str) -> list[str]:
    """Every schema the benchmark of ``url`` uses: the named one, ``_raw``, ``_workers``."""
    base = schema_of(url)
    return [base + suffix for suffix in SUFFIXES]


def prepare_schemas(url: str) -> list[str]:
    """Drop and create anew, empty and marked, every schema of ``scratch_schemas(url)``.

    A schema that does not exist is created and marked; one that exists with the
    mark is dropped with all it holds and created again. If any of them exists
    without the mark, ``NotBenchSchema`` names it and nothing at all was changed:
    the checks come first and everything runs in one transaction. Returns the
    schemas, in order.
    """
    import psycopg
    from psycopg import sql

    names = scratch_schemas(url)
    with psycopg.connect(parse_url(url).target) as conn, conn.transaction():
        for name in names:
            # Two benchmarks given the same schema would drop it under each other.
            conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                         (f"hailq bench {name}",))
        rows = conn.execute(
            "SELECT nspname, obj_description(oid, 'pg_namespace') FROM pg_namespace "
            "WHERE nspname = ANY(%s)", (names,)).fetchall()
        marks = {str(name): comment for name, comment in rows}
        for name in names:
            if name in marks and marks[name] != MARK:
                raise NotBenchSchema(
                    f"PostgreSQL schema {name} exists and was not created by hailq bench "
                    f"(it lacks the comment {MARK!r}); hailq bench empties the schemas it "
                    "measures in, so it refuses this one and changed nothing: pass "
                    "?schema= naming a new schema in --postgres (if this is a scratch "
                    "schema an older hailq bench left, drop it yourself)")
        for name in names:
            ident = sql.Identifier(name)
            if name in marks:
                conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(ident))
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(ident))
            conn.execute(sql.SQL("COMMENT ON SCHEMA {} IS {}").format(ident, sql.Literal(MARK)))
    return names
