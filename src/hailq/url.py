"""Broker URLs: the generic part. ``scheme://...?options`` is split here; what each
scheme's options mean is its backend's business (``hailq.backends.registry``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import SplitResult, parse_qsl, quote, unquote, urlsplit, urlunsplit

from hailq.errors import InvalidArgument

DEFAULT_URL = "sqlite:///hailq.db"


@dataclass(frozen=True)
class BrokerURL:
    """A broker URL its backend has checked: nothing in it is refused later."""

    scheme: str  # the backend's canonical scheme: "sqlite" or "postgresql"
    target: str  # a file path, or a libpq connection URL without hailq's options
    options: dict[str, str] = field(default_factory=dict)  # hailq's own options, as given
    display: str = ""  # safe to print: never holds a password


@dataclass(frozen=True)
class SplitURL:
    """A broker URL split but not yet judged by a backend."""

    text: str  # as given
    scheme: str  # lower-case; "" when there is none
    parts: SplitResult
    query: dict[str, str]  # every query option, blank values kept


def split_url(url: object) -> SplitURL:
    """Split a broker URL; InvalidArgument if it is not a non-empty string of text."""
    if not isinstance(url, str) or not url:
        raise InvalidArgument(f"broker URL must be a non-empty string, got {url!r}")
    try:
        url.encode("utf-8")
    except UnicodeEncodeError:
        # A byte that was not UTF-8 on the command line (decoded as a lone surrogate).
        raise InvalidArgument(f"broker URL {_safe(url)!a} is not valid text (UTF-8)") from None
    parts = urlsplit(url)
    return SplitURL(url, parts.scheme.lower(), parts,
                    dict(parse_qsl(parts.query, keep_blank_values=True)))


def parse_url(url: object) -> BrokerURL:
    """Split a broker URL and have its scheme's backend check it; raise InvalidArgument
    naming what is allowed, or BackendUnavailable when that backend is not installed."""
    # Imported here: the registry builds on this module's BrokerURL and helpers.
    from hailq.backends.registry import lookup

    split = split_url(url)
    return lookup(split).parse(split)


def only_options(query: dict[str, str], allowed: set[str], kind: str) -> None:
    """InvalidArgument naming the options of ``query`` that are not ``allowed``."""
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
        query = "&".join(_safe_pair(pair) for pair in query.split("&"))
    if (netloc, query) == (parts.netloc, parts.query):
        return url
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _safe_pair(pair: str) -> str:
    """One ``key=value`` of a query, safe to show: ``password`` hidden, and the password of
    a URL given as a value (PostgreSQL's ``listen=postgresql://...``) too."""
    key, _, value = pair.partition("=")
    if key.lower() == "password":
        return "password=***"
    inner = unquote(value)
    if "://" in inner:
        safe = _safe(inner)
        if safe != inner:
            return f"{key}={quote(safe, safe=':/@*,')}"
    return pair


def redact(url: str) -> str:
    """Make a URL safe to log or show: any password becomes ``***``."""
    return _safe(url)
