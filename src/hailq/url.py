"""Broker URLs: ``sqlite:///path.db`` and ``postgresql://user@host:port/db``."""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from hailq.errors import InvalidArgument

DEFAULT_URL = "sqlite:///hailq.db"
SQLITE_OPTIONS = {"synchronous", "busy_timeout", "poll_interval"}
POSTGRES_OPTIONS = {"schema", "pool_size", "poll_interval"}


@dataclass(frozen=True)
class BrokerURL:
    scheme: str  # "sqlite" or "postgresql"
    target: str  # a file path, or a libpq connection URL without hailq's options
    options: dict[str, str] = field(default_factory=dict)
    display: str = ""  # safe to print: never holds a password


def parse_url(url: object) -> BrokerURL:
    """Split a broker URL; raise InvalidArgument naming what is allowed."""
    if not isinstance(url, str) or not url:
        raise InvalidArgument(f"broker URL must be a non-empty string, got {url!r}")
    try:
        url.encode("utf-8")
    except UnicodeEncodeError:
        # A byte that was not UTF-8 on the command line (decoded as a lone surrogate).
        raise InvalidArgument(f"broker URL {_safe(url)!a} is not valid text (UTF-8)") from None
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    if scheme == "sqlite":
        path = url[len("sqlite:///"):].split("?", 1)[0] if url.lower().startswith(
            "sqlite:///") else ""
        if not path:
            raise InvalidArgument(
                f"SQLite URL needs a file path: sqlite:///relative.db or sqlite:////abs/path.db, "
                f"got {_safe(url)!r}")
        if path == ":memory:" or path.startswith("file::memory:"):
            # An in-memory database lives in one connection: hailq's other threads and
            # processes, and its workers, would each see an empty database of their own.
            raise InvalidArgument(
                f"hailq needs a database file that every thread and process can open, not "
                f"an in-memory database ({_safe(url)!r}); for tests use a temporary file: "
                "sqlite:////tmp/test-hailq.db")
        _only(query, SQLITE_OPTIONS, "sqlite")
        return BrokerURL("sqlite", path, query, f"sqlite:///{path}")
    if scheme in ("postgresql", "postgres"):
        mine = {k: v for k, v in query.items() if k in POSTGRES_OPTIONS}
        rest = urlencode([(k, v) for k, v in query.items() if k not in POSTGRES_OPTIONS],
                         quote_via=quote)
        # Built by hand: urlunsplit drops the empty host of postgresql:///db?host=/run/pg.
        target = f"postgresql://{parts.netloc}{parts.path}" + (f"?{rest}" if rest else "")
        _check_libpq(target, parts.password)
        return BrokerURL("postgresql", target, mine, _safe(url))
    raise InvalidArgument(
        f"unsupported broker URL {_safe(url)!r}: use sqlite:///path.db or "
        "postgresql://user@host:port/database")


def _check_libpq(target: str, password: str | None) -> None:
    """The rest of a PostgreSQL URL is libpq's: an option it does not know, or a value it
    cannot read, is bad input now rather than a failure to connect later."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    try:
        conninfo_to_dict(target)
    except psycopg.ProgrammingError as exc:
        reason = str(exc).strip()
        if password:
            reason = reason.replace(password, "***")
        raise InvalidArgument(f"PostgreSQL URL {_safe(target)!r}: {reason}; hailq's own "
                              f"options are {', '.join(sorted(POSTGRES_OPTIONS))}, the others "
                              "go to libpq") from None


def _only(query: dict[str, str], allowed: set[str], kind: str) -> None:
    unknown = sorted(set(query) - allowed)
    if unknown:
        raise InvalidArgument(f"unknown {kind} URL option(s) {', '.join(unknown)}; "
                              f"allowed: {', '.join(sorted(allowed))}")


def _safe(url: str) -> str:
    """The URL with any password replaced by ***: in the user part, and libpq's
    ``password=`` query option."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable URL>"
    netloc, query = parts.netloc, parts.query
    if parts.password is not None:
        host = netloc.rpartition("@")[2]  # as written: a port that is not a number too
        netloc = f"{parts.username}:***@{host}" if parts.username else f"***@{host}"
    if query:
        query = "&".join("password=***" if pair.split("=", 1)[0].lower() == "password"
                         else pair for pair in query.split("&"))
    if (netloc, query) == (parts.netloc, parts.query):
        return url
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redact(url: str) -> str:
    """Public alias: make a URL safe to log or show."""
    return _safe(url)
