"""Named SQL queries and numbered migrations, read from ``.sql`` files in a package."""

from __future__ import annotations

import re
from importlib import resources

_SECTION = re.compile(r"^-- (name|part): ([a-z_]+)\s*$", re.MULTILINE)


def load_queries(package: str, filename: str = "queries.sql") -> dict[str, str]:
    """Split a file of ``-- name: xyz`` sections into ``{name: sql}``. A ``-- part: xyz``
    section is no statement but SQL that several statements share, written once: its
    text replaces ``{xyz}`` in them."""
    text = resources.files(package).joinpath(filename).read_text(encoding="utf-8")
    pieces = _SECTION.split(text)
    queries: dict[str, str] = {}
    parts: dict[str, str] = {}
    for kind, name, body in zip(pieces[1::3], pieces[2::3], pieces[3::3], strict=True):
        if name in queries or name in parts:
            raise ValueError(f"query {name} is defined twice in {package}/{filename}")
        (parts if kind == "part" else queries)[name] = body.strip().rstrip(";")
    for name, part in parts.items():
        mark = "{" + name + "}"
        if not any(mark in sql for sql in queries.values()):
            raise ValueError(f"part {name} of {package}/{filename} is used nowhere")
        queries = {key: sql.replace(mark, part) for key, sql in queries.items()}
    return queries


def load_migrations(package: str) -> list[tuple[int, str, str]]:
    """Return ``(version, filename, sql)`` for ``migrations/NNNN_name.sql``, in order."""
    folder = resources.files(package).joinpath("migrations")
    found = []
    for entry in folder.iterdir():
        match = re.fullmatch(r"(\d{4})_[a-z0-9_]+\.sql", entry.name)
        if match:
            found.append((int(match.group(1)), entry.name, entry.read_text(encoding="utf-8")))
    found.sort()
    versions = [version for version, _, _ in found]
    if versions != list(range(1, len(versions) + 1)):
        raise ValueError(f"migrations of {package} are not numbered 1..n: {versions}")
    return found
