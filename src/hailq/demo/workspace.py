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

from hailq.url import parse_url, redact


@dataclass(frozen=True)
class Workspace:
    """The broker URL of the run, the results database path, and what to clean up."""

    url: str
    directory: Path
    schema: str | None
    keep: bool

    @property
    def results_path(self) -> str:
        return str(self.directory / "results.db")

    @property
    def display_url(self) -> str:
        return redact(self.url)

    @classmethod
    def create(cls, url: str | None, keep: str | None) -> Workspace:
        """SQLite in the directory when ``url`` is None; else a fresh schema on PostgreSQL."""
        if keep:
            directory = Path(keep).resolve()
            directory.mkdir(parents=True, exist_ok=True)
        else:
            directory = Path(tempfile.mkdtemp(prefix="hailq-demo-"))
        if url is None:
            return cls(f"sqlite:///{directory / 'broker.db'}", directory, None, bool(keep))
        if parse_url(url).scheme == "sqlite":
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
