"""Named SQL queries and numbered migrations, read from ``.sql`` files in a package."""

from __future__ import annotations

import re
from importlib import resources

_SECTION = re.compile(r"^-- (name|part): ([a-z_]+)\s*$", re.MULTILINE)
_USE = re.compile(r"\{([a-z_]+)(?:\(([^(){}]*)\))?\}")
SHARED = "shared.sql"  # in hailq.backends: parts both dialects' statements use


def load_queries(package: str, filename: str = "queries.sql") -> dict[str, str]:
    """Split a file of ``-- name: xyz`` sections into ``{name: sql}``. A ``-- part: xyz``
    section is no statement but SQL that several statements share, written once: its
    text replaces ``{xyz}`` in them (and in other parts); ``{xyz(a, b)}`` replaces its
    ``$1`` and ``$2`` with ``a`` and ``b``. The parts of ``hailq/backends/shared.sql``
    (SQL both dialects write alike) are every file's too. Other ``{...}`` stay, for
    the dialect to fill in."""
    queries: dict[str, str] = {}
    parts: dict[str, str] = {}
    own = _sections(resources.files(package).joinpath(filename).read_text(encoding="utf-8"),
                    f"{package}/{filename}", queries, parts)
    _sections(resources.files("hailq.backends").joinpath(SHARED).read_text(encoding="utf-8"),
              SHARED, {}, parts)
    used: set[str] = set()

    def expand(sql: str) -> str:
        def one(use: re.Match[str]) -> str:
            name, args = use.group(1), use.group(2)
            if name not in parts:
                return use.group(0)
            used.add(name)
            text = expand(parts[name])
            for n, arg in enumerate(args.split(",") if args else [], start=1):
                text = text.replace(f"${n}", arg.strip())
            return text

        return _USE.sub(one, sql)

    queries = {name: expand(sql) for name, sql in queries.items()}
    for name in own - used:
        raise ValueError(f"part {name} of {package}/{filename} is used nowhere")
    return queries


def _sections(text: str, where: str, queries: dict[str, str],
              parts: dict[str, str]) -> set[str]:
    """Add ``text``'s statements and parts; the names of its parts."""
    pieces = _SECTION.split(text)
    found = set()
    for kind, name, body in zip(pieces[1::3], pieces[2::3], pieces[3::3], strict=True):
        if name in queries or name in parts:
            raise ValueError(f"query {name} is defined twice in {where}")
        text = body.strip().rstrip(";")
        if kind == "part":  # its leading comment speaks of the part, not of each use
            text = "\n".join(_uncommented(text.splitlines()))
            found.add(name)
        (parts if kind == "part" else queries)[name] = text
    return found


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


def _uncommented(lines: list[str]) -> list[str]:
    while lines and lines[0].startswith("--"):
        lines = lines[1:]
    return lines
