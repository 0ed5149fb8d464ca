"""Where a demo run keeps its data: a temporary directory, and on PostgreSQL its own schema.

Both are removed at the end unless the user asked to keep them (``--keep``).
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from hailq.errors import InvalidArgument
from hailq.url import parse_url, redact

BROKER_FILE = "broker.db"  # the broker, when no URL is given
RESULTS_FILE = "results.db"  # the insurer's results database
FILES = (BROKER_FILE, RESULTS_FILE)


@dataclass(frozen=True)
class Workspace:
    """The broker URL of the run, the results database path, and what to clean up."""

    url: str
    directory: Path
    schema: str | None
    keep: bool

    @property
    def results_path(self) -> str:
        return str(self.directory / RESULTS_FILE)

    @property
    def display_url(self) -> str:
        return redact(self.url)

    @classmethod
    def create(cls, url: str | None, keep: str | None) -> Workspace:
        """SQLite in the directory when ``url`` is None; else a fresh schema on PostgreSQL.

        The demo counts what it finds, so it never works in a database or a kept
        directory that already holds data: a SQLite file given by URL must not
        exist yet (it may be someone's real broker), nor may ``keep`` hold an
        earlier run. Raises ``InvalidArgument`` before anything is created.
        """
        parsed = parse_url(url) if url is not None else None
        if parsed is not None and parsed.scheme == "sqlite" and Path(parsed.target).exists():
            raise InvalidArgument(
                f"{parsed.display} already exists; the demo needs a SQLite file of its own "
                "(it would count what is there as its claims): name a new file, or give no "
                "URL for a temporary one")
        if keep:
            directory = Path(keep).resolve()
            earlier = [name for name in FILES if (directory / name).exists()]
            if earlier:
                raise InvalidArgument(f"{directory} already holds a demo run "
                                      f"({', '.join(earlier)}); keep this one elsewhere")
            directory.mkdir(parents=True, exist_ok=True)
        else:
            directory = Path(tempfile.mkdtemp(prefix="hailq-demo-"))
        if url is None:
            return cls(f"sqlite:///{directory / BROKER_FILE}", directory, None, bool(keep))
        if parsed is not None and parsed.scheme == "sqlite":
            return cls(url, directory, None, bool(keep))
        schema = f"hailq_demo_{uuid.uuid4().hex[:10]}"
        return cls(with_schema(url, schema), directory, schema, bool(keep))

    def close(self) -> None:
        """Drop the schema and remove the directory, unless kept."""
        if self.keep:
            return
        if self.schema is not None:
            drop_schema(self.url, self.schema)
        shutil.rmtree(self.directory, ignore_errors=True)


def with_schema(url: str, schema: str) -> str:
    """``url`` with its ``schema=`` option set to ``schema``."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "schema"]
    query.append(("schema", schema))
    return urlunsplit(parts._replace(query=urlencode(query)))


def drop_schema(url: str, schema: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(parse_url(url).target, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
