"""Which backend serves which URL scheme.

Each kind of storage is one ``BackendKind``: the schemes it answers to, how it
checks its URL and options (``parse``), and how it opens (``open``). ``connect``
and ``parse_url`` only split a URL and look its scheme up here, so a new
backend is one more entry in ``KINDS`` and nothing else changes. A backend's
module, and its database driver, are imported only when a URL of its scheme is
opened: ``import hailq`` and a SQLite broker never load the PostgreSQL driver.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

from hailq._time import Clock, system_clock
from hailq.errors import BackendUnavailable, InvalidArgument
from hailq.url import BrokerURL, SplitURL, only_options, redact, split_url

if TYPE_CHECKING:
    from hailq.backends.base import Backend

SQLITE_OPTIONS = {"synchronous", "busy_timeout", "poll_interval"}
POSTGRES_OPTIONS = {"schema", "pool_size", "poll_interval", "timeout", "pooler", "prepare",
                    "listen"}
POOLERS = ("none", "session", "transaction")
POSTGRES_MISSING = ("PostgreSQL support is not installed, install it with "
                    "pip install 'hailq[postgres]'")


@dataclass(frozen=True)
class BackendKind:
    """One kind of storage, as the URL schemes it answers to."""

    name: str  # for people: "SQLite"
    schemes: tuple[str, ...]  # lower-case; the first is the one BrokerURL.scheme holds
    example: str  # a URL shape to show when a URL is refused
    parse: Callable[[SplitURL], BrokerURL]  # check everything that can be checked offline
    open: Callable[[BrokerURL, Clock | None], Backend]  # build the backend of a parsed URL


def lookup(split: SplitURL) -> BackendKind:
    """The kind of backend for the URL's scheme; InvalidArgument listing the known ones."""
    kind = _BY_SCHEME.get(split.scheme)
    if kind is None:
        raise InvalidArgument(
            f"unsupported broker URL {redact(split.text)!r}: the schemes hailq knows are "
            f"{', '.join(sorted(_BY_SCHEME))}; use "
            f"{' or '.join(k.example for k in KINDS)}")
    return kind


def schemes() -> list[str]:
    """Every URL scheme a backend is registered for, sorted."""
    return sorted(_BY_SCHEME)


# -- SQLite --------------------------------------------------------------------------------


def _parse_sqlite(split: SplitURL) -> BrokerURL:
    url = split.text
    # Taken from the text as written: urlsplit would read sqlite://host/... as a host.
    path = url[len("sqlite:///"):].split("?", 1)[0] if url.lower().startswith(
        "sqlite:///") else ""
    if not path:
        raise InvalidArgument(
            f"SQLite URL needs a file path: sqlite:///relative.db or sqlite:////abs/path.db, "
            f"got {redact(url)!r}")
    if path == ":memory:" or path.startswith("file::memory:"):
        # An in-memory database lives in one connection: hailq's other threads and
        # processes, and its workers, would each see an empty database of their own.
        raise InvalidArgument(
            f"hailq needs a database file that every thread and process can open, not "
            f"an in-memory database ({redact(url)!r}); for tests use a temporary file: "
            "sqlite:////tmp/test-hailq.db")
    only_options(split.query, SQLITE_OPTIONS, "sqlite")
    parsed = BrokerURL("sqlite", path, split.query, f"sqlite:///{path}")
    _sqlite_settings(parsed)  # a bad value is refused now, before any file is made
    return parsed


def _sqlite_settings(parsed: BrokerURL) -> dict[str, Any]:
    settings: dict[str, Any] = {}
    if "synchronous" in parsed.options:
        settings["synchronous"] = parsed.options["synchronous"].lower()
    for key in ("busy_timeout", "poll_interval"):
        if key in parsed.options:
            settings[key] = _float_option(parsed.options, key)
    return settings


def _open_sqlite(parsed: BrokerURL, clock: Clock | None) -> Backend:
    from hailq.backends.sqlite.backend import SQLiteBackend

    return SQLiteBackend(parsed.target, clock=clock or system_clock, **_sqlite_settings(parsed))


# -- PostgreSQL ----------------------------------------------------------------------------


def _parse_postgres(split: SplitURL) -> BrokerURL:
    _require_psycopg()
    parts, query = split.parts, split.query
    mine = {k: v for k, v in query.items() if k in POSTGRES_OPTIONS}
    rest = urlencode([(k, v) for k, v in query.items() if k not in POSTGRES_OPTIONS],
                     quote_via=quote)
    # Built by hand: urlunsplit drops the empty host of postgresql:///db?host=/run/pg.
    target = f"postgresql://{parts.netloc}{parts.path}" + (f"?{rest}" if rest else "")
    _check_libpq(target, parts.password)
    parsed = BrokerURL("postgresql", target, mine, redact(split.text))
    _postgres_settings(parsed)
    return parsed


def _require_psycopg() -> None:
    """BackendUnavailable, not an ImportError from deep inside, when the optional
    PostgreSQL driver is missing (``pip install hailq`` is SQLite only)."""
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError as exc:  # also psycopg's own, when it finds no libpq to use
        raise BackendUnavailable(POSTGRES_MISSING) from exc


def _check_libpq(target: str, password: str | None) -> None:
    """The rest of a PostgreSQL URL is libpq's: an option it does not know, or a value it
    cannot read, is bad input now rather than a failure to connect later."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    try:
        given = conninfo_to_dict(target)
    except psycopg.ProgrammingError as exc:
        reason = str(exc).strip()
        if password:
            reason = reason.replace(password, "***")
        raise InvalidArgument(f"PostgreSQL URL {redact(target)!r}: {reason}; hailq's own "
                              f"options are {', '.join(sorted(POSTGRES_OPTIONS))}, the others "
                              "go to libpq") from None
    wait = str(given.get("connect_timeout", "5")).strip()
    if not wait.lstrip("-").isdigit() or int(wait) <= 0:
        # libpq reads 0 or less as "wait for ever" (rule 31 forbids that).
        raise InvalidArgument(f"PostgreSQL URL option connect_timeout must be a whole number "
                              f"of seconds, at least 1 (libpq waits at least 2), got {wait!r}")


def _postgres_settings(parsed: BrokerURL) -> dict[str, Any]:
    options = parsed.options
    pooler = _choice(options, "pooler", POOLERS, "none")
    # Through a transaction pooler, consecutive statements of one client run on different
    # server connections: a statement prepared on one is unknown on the next, and a
    # LISTEN stays behind on a connection that others use. Both are off by default there,
    # and asking for them is refused rather than left to fail later.
    through = pooler == "transaction"
    prepare = _choice(options, "prepare", ("on", "off"), "off" if through else "on")
    listen = options.get("listen", "off" if through else "on")
    if listen.lower() in ("on", "off"):
        listen = listen.lower()
    if through and prepare == "on":
        raise InvalidArgument("URL option prepare=on cannot work with pooler=transaction: a "
                              "statement prepared on one server connection is unknown on the "
                              "next; leave prepare out (off) or use pooler=session")
    if through and listen == "on":
        raise InvalidArgument("URL option listen=on cannot work with pooler=transaction: "
                              "LISTEN needs a session of its own; give listen a direct URL "
                              "of the same database (listen=postgresql://host:5432/db, "
                              "percent-encoded) or leave it out (off: workers poll every "
                              "poll_interval)")
    return {"schema": options.get("schema", "hailq"),
            "pool_size": _int_option(options, "pool_size", 10),
            "poll_interval": _float_option(options, "poll_interval", 1.0),
            "timeout": _timeout(options),
            "prepare": prepare == "on",
            "listen": _listen_target(listen)}


def _timeout(options: dict[str, str]) -> float:
    value = _float_option(options, "timeout", 30.0)
    if value < 1:
        raise InvalidArgument(f"URL option timeout must be at least 1 (seconds), got "
                              f"{options['timeout']!r}")
    return value


def _listen_target(listen: str) -> str | None:
    """The libpq URL that LISTEN connects to: the broker's own (``on``, given back as ""),
    none (``off``), or a direct URL of its own, with libpq's options only."""
    if listen == "off":
        return None
    if listen == "on":
        return ""
    split = split_url(listen)
    if split.scheme not in ("postgresql", "postgres"):
        raise InvalidArgument(
            f"URL option listen must be on, off or a postgresql:// URL of the same "
            f"database (percent-encoded), got {redact(listen)!r}")
    mine = sorted(set(split.query) & POSTGRES_OPTIONS)
    if mine:
        raise InvalidArgument(
            f"the listen URL {redact(listen)!r} takes libpq's options only; hailq's own "
            f"({', '.join(mine)}) belong to the broker's URL")
    _check_libpq(listen, split.parts.password)
    return listen


def _open_postgres(parsed: BrokerURL, clock: Clock | None) -> Backend:
    if clock is not None:
        raise InvalidArgument("PostgreSQL uses the database clock; clock= is for SQLite")
    from hailq.backends.postgres.backend import PostgresBackend

    return PostgresBackend(parsed.target, display=parsed.display, **_postgres_settings(parsed))


# -- option values -------------------------------------------------------------------------


def _choice(options: dict[str, str], key: str, allowed: tuple[str, ...], default: str) -> str:
    value = options.get(key, default).lower()
    if value not in allowed:
        raise InvalidArgument(f"URL option {key} must be one of {', '.join(allowed)}, "
                              f"got {options[key]!r}")
    return value


def _int_option(options: dict[str, str], key: str, default: int) -> int:
    value = _float_option(options, key, default)
    if value != int(value):
        raise InvalidArgument(f"URL option {key} must be a whole number, got {options[key]!r}")
    return int(value)


def _float_option(options: dict[str, str], key: str, default: float | None = None) -> float:
    if key not in options:
        if default is None:
            raise InvalidArgument(f"URL option {key} is required")
        return default
    try:
        value = float(options[key])
    except ValueError:
        raise InvalidArgument(f"URL option {key} must be a number, got {options[key]!r}") from None
    if not 0 < value < 1e6:
        raise InvalidArgument(f"URL option {key} must be positive, got {options[key]!r}")
    return value


KINDS = (
    BackendKind("SQLite", ("sqlite",), "sqlite:///path.db", _parse_sqlite, _open_sqlite),
    BackendKind("PostgreSQL", ("postgresql", "postgres"),
                "postgresql://user@host:port/database", _parse_postgres, _open_postgres),
)
_BY_SCHEME = {scheme: kind for kind in KINDS for scheme in kind.schemes}
