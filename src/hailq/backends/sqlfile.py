"""Named SQL queries and numbered migrations, read from ``.sql`` files in a package."""

from __future__ import annotations

import re
from importlib import resources

_NAME = re.compile(r"^-- name: ([a-z_]+)\s*$", re.MULTILINE)


def load_queries(package: str, filename: str = "queries.sql") -> dict[str, str]:
    """Split a file of ``-- name: xyz`` sections into ``{name: sql}``."""
    text = resources.files(package).joinpath(filename).read_text(encoding="utf-8")
    parts = _NAME.split(text)
    queries: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in queries:
            raise ValueError(f"query {name} is defined twice in {package}/{filename}")
        queries[name] = body.strip().rstrip(";")
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
