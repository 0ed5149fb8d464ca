"""Who may do what on ``hailq serve`` (SPEC rule 29), checked before any route runs.

In this order, for every request:

0. ``/healthz`` passes whatever its Host (a probe by IP address; it shows nothing),
   and its body, if any, is never read;
1. a ``Host`` that is not this server's (DNS rebinding), or two of them -> 403;
2. an ``Origin`` of another site (scheme, name and port: a plain-HTTP server is
   ``http://`` only), or two ``Origin`` headers -> 403;
3. ``/login`` passes (it checks the token it is given; its body is never read);
4. a token from ``Authorization: Bearer`` or the ``hailq_token`` cookie, compared in
   constant time; none or an unknown one -> 401;
5. a cookie-authenticated POST/PUT/PATCH/DELETE without an ``Origin`` (or
   ``Referer``) of this server -> 403 (CSRF: the cookie alone proves nothing);
6. the route's role: GET and HEAD need ``read`` (``/openapi.json`` any role);
   sending, receiving, acking, nacking, extending and publishing need
   ``client``; every other change needs ``admin`` -> 403 otherwise;
7. a body over the cap -> 413, from ``Content-Length`` or by counting what
   arrives, before any route parses it; a body that has not all arrived within
   ``read_timeout`` seconds -> 408.

No byte of a body is read before steps 1 to 6 passed: an unauthenticated client
cannot make the server hold its body. A refused request whose body was not read
is answered with ``Connection: close``, so what it still sends is not read either.

Roles: ``admin`` may do everything, ``read`` only looks, ``client`` may only send,
receive, ack, nack, extend and publish (what a producer or consumer in another
language needs): it never looks at other messages, dead letters or figures, and
never purges, deletes or configures.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from typing import Literal
from urllib.parse import urlsplit

import anyio
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from hailq.errors import InvalidArgument
from hailq.serve.errors import error_response

Role = Literal["admin", "read", "client"]
COOKIE = "hailq_token"
OPEN_PATHS = frozenset({"/healthz", "/login"})
MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
MIN_TOKEN = 16  # characters of each token of a server that others can reach
_DEFAULT_PORTS = {"http": 80, "https": 443}

# What a producer or consumer in another language needs, and nothing more.
_CLIENT_ROUTES = tuple(re.compile(p) for p in (
    r"/api/queues/[^/]+/messages",
    r"/api/queues/[^/]+/receive",
    r"/api/queues/[^/]+/ack",
    r"/api/queues/[^/]+/nack",
    r"/api/queues/[^/]+/extend",
    r"/api/topics/[^/]+/publish",
))
# What each role may do: the roles that satisfy a requirement.
_SATISFIES: dict[str, frozenset[str]] = {
    "any": frozenset({"admin", "read", "client"}),
    "read": frozenset({"admin", "read"}),
    "client": frozenset({"admin", "client"}),
    "admin": frozenset({"admin"}),
}


@dataclass(frozen=True)
class Tokens:
    """The tokens the server accepts, by role. Empty strings are ignored."""

    admin: tuple[str, ...] = ()
    read: tuple[str, ...] = ()
    client: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("admin", "read", "client"):
            given = getattr(self, name)
            if isinstance(given, str):  # one token, not a sequence of its characters
                given = (given,)
            object.__setattr__(self, name, tuple(t for t in given if t))

    def role_of(self, token: str) -> Role | None:
        """The role of ``token``, or None. Every known token is compared, in constant
        time each, so the answer's timing says nothing about which one nearly matched."""
        found: Role | None = None
        given = token.encode("utf-8", "surrogateescape")
        for role, known in (("admin", self.admin), ("client", self.client),
                            ("read", self.read)):
            for candidate in known:
                if hmac.compare_digest(given, candidate.encode("utf-8", "surrogateescape")) \
                        and found is None:
                    found = role  # type: ignore[assignment]
        return found

    def __bool__(self) -> bool:
        return bool(self.admin or self.read or self.client)


@dataclass(frozen=True)
class Policy:
    """What the middleware enforces besides the tokens."""

    tokens: Tokens
    bound_host: str = "127.0.0.1"
    allow_hosts: tuple[str, ...] = ()  # more Host names; "*" allows any (behind a proxy)
    max_body: int = 2 * 1024 * 1024
    read_timeout: float = 20.0  # seconds a request's body has to arrive
    allowed: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        names = {*LOOPBACK_NAMES, _bare(self.bound_host), *(_bare(h) for h in self.allow_hosts)}
        # A wildcard bind address is no name anyone reaches the server by; pages that
        # call http://0.0.0.0:PORT are how sites reach services on a visitor's machine.
        names -= {"0.0.0.0", "::"}
        object.__setattr__(self, "allowed", frozenset(n.lower() for n in names if n))

    def host_allowed(self, host: str) -> bool:
        return "*" in self.allowed or _bare(_host_name(host)).lower() in self.allowed


def required_role(method: str, path: str) -> str:
    """The least role a request needs: GET never changes anything, so ``read``; the
    API's description (``/openapi.json``) is for every role, clients' code generators
    included."""
    if method in ("GET", "HEAD", "OPTIONS"):
        return "any" if path == "/openapi.json" else "read"
    if method == "POST" and any(p.fullmatch(path) for p in _CLIENT_ROUTES):
        return "client"
    return "admin"


def permits(role: str, needed: str) -> bool:
    return role in _SATISFIES.get(needed, frozenset())


class SecurityMiddleware:
    """The pure-ASGI guard in front of every route (see the module docstring)."""

    def __init__(self, app: ASGIApp, policy: Policy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        method, path = scope["method"], scope["path"]
        unread = _CLOSE if _declares_body(headers) else {}
        refusal = self._refusal(scope, headers, method, path)
        if refusal is not None:
            status, code, message = refusal
            extra = {"WWW-Authenticate": "Bearer"} if status == 401 else {}
            await error_response(status, code, message, {**extra, **unread})(
                scope, receive, send)
            return
        if path in OPEN_PATHS:  # they take no body: whatever comes is never read
            await self.app(scope, _replay(b"", receive), _closing(send) if unread else send)
            return
        body = await self._read_body(headers, receive)
        if body is _TOO_LARGE:
            await error_response(413, "too_large",
                                 f"the request body is larger than {self.policy.max_body} "
                                 "bytes (hailq serve --max-body)", _CLOSE)(scope, receive, send)
            return
        if body is _TOO_SLOW:
            await error_response(408, "request_timeout",
                                 f"the request body did not arrive within "
                                 f"{self.policy.read_timeout:g} s", _CLOSE)(scope, receive, send)
            return
        await self.app(scope, _replay(body, receive), send)

    def _refusal(self, scope: Scope, headers: Headers, method: str,
                 path: str) -> tuple[int, str, str] | None:
        host = headers.get("host", "")
        if path == "/healthz":  # a probe by IP address must pass; it shows nothing
            return None
        if len(headers.getlist("host")) > 1 or not self.policy.host_allowed(host):
            return 403, "foreign_host", ("this server does not answer for that Host name "
                                         "(hailq serve --allow-host)")
        origins = headers.getlist("origin")
        if len(origins) > 1:  # which one would a check believe? Neither.
            return 403, "foreign_origin", "a request with two Origin headers is refused"
        origin = origins[0] if origins else None
        if origin is not None and not _same_origin(origin, scope, host):
            return 403, "foreign_origin", "requests from another site are refused"
        scope.setdefault("state", {})
        if path in OPEN_PATHS:
            return None
        token, by_cookie = _token(headers)
        role = self.policy.tokens.role_of(token) if token is not None else None
        if role is None:
            return 401, "unauthorized", ("a valid token is needed: send 'Authorization: "
                                         "Bearer TOKEN' or open the login link")
        if by_cookie and method in MUTATING:
            referer = headers.get("referer")
            if origin is None and (referer is None or not _same_origin(referer, scope, host)):
                return 403, "csrf", ("a change made with the login cookie needs an Origin "
                                     "header of this server")
        needed = required_role(method, path)
        if not permits(role, needed):
            return 403, "forbidden", f"the {role} role may not do this (needs {needed})"
        scope["state"]["role"] = role
        return None

    async def _read_body(self, headers: Headers, receive: Receive) -> bytes:
        """The whole body; ``_TOO_LARGE`` once it is known to exceed the cap (from
        ``Content-Length`` before reading anything, else by counting what arrives),
        ``_TOO_SLOW`` if it has not all come within ``read_timeout`` seconds."""
        cap = self.policy.max_body
        length = headers.get("content-length", "").strip()
        if length.isascii() and length.isdigit() and (len(length) > 12 or int(length) > cap):
            return _TOO_LARGE
        chunks: list[bytes] = []
        size = 0
        with anyio.move_on_after(self.policy.read_timeout):
            while True:
                message = await receive()
                if message["type"] != "http.request":
                    break
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > cap:
                    return _TOO_LARGE
                chunks.append(chunk)
                if not message.get("more_body", False):
                    break
            return b"".join(chunks)
        return _TOO_SLOW


_TOO_LARGE = b"\x00too large"  # markers compared by identity, never sent anywhere
_TOO_SLOW = b"\x00too slow"
_CLOSE = {"Connection": "close"}


def _declares_body(headers: Headers) -> bool:
    """Whether the request says a body follows (a length above 0, or chunks)."""
    length = headers.get("content-length", "0").strip()
    return "transfer-encoding" in headers or length not in ("", "0")


def _closing(send: Send) -> Send:
    """``send`` that answers with ``Connection: close``: the body left unread is not
    read after the answer either."""

    async def closing(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []),
                                              (b"connection", b"close")]}
        await send(message)

    return closing


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()  # waits for the disconnect, as Starlette expects

    return replay


def _token(headers: Headers) -> tuple[str | None, bool]:
    """The token of the request and whether it came from the cookie."""
    authorization = headers.get("authorization")
    if authorization is not None:
        scheme, _, value = authorization.partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return value.strip(), False
        return None, False
    for raw in headers.getlist("cookie"):
        jar: SimpleCookie = SimpleCookie()
        try:
            jar.load(raw)
        except Exception:  # a malformed cookie header: as if there were none
            continue
        if COOKIE in jar:
            return jar[COOKIE].value, True
    return None, False


def _same_origin(origin: str, scope: Scope, host: str) -> bool:
    """Whether ``origin`` (an Origin or Referer) is this server as the browser reached
    it: the same scheme (``http`` for a plain-HTTP server, ``https`` under TLS), name
    and port (a scheme's default port written or not)."""
    scheme = scope.get("scheme", "http")
    try:
        parts = urlsplit(origin)
        port = parts.port
        reached = urlsplit(f"{scheme}://{host}")
        reached_port = reached.port
    except ValueError:
        return False
    if parts.scheme != scheme or not parts.hostname or parts.username is not None \
            or parts.password is not None:
        return False
    default = _DEFAULT_PORTS.get(scheme)
    return (parts.hostname == reached.hostname
            and (port or default) == (reached_port or default))


def _host_name(host: str) -> str:
    """The name part of a Host header (``[::1]:8642`` -> ``[::1]``, ``a:80`` -> ``a``)."""
    if host.startswith("["):
        return host.partition("]")[0] + "]"
    return host.rpartition(":")[0] if host.count(":") == 1 else host


def _bare(name: str) -> str:
    return name[1:-1] if name.startswith("[") and name.endswith("]") else name


def check_tokens(tokens: Tokens, host: str) -> None:
    """InvalidArgument unless every token of a server bound to ``host`` is at least
    ``MIN_TOKEN`` characters long, where ``host`` is not loopback: a short token is
    guessed from the network."""
    if is_loopback(host):
        return
    short = [role for role, known in _by_role(tokens) for t in known if len(t) < MIN_TOKEN]
    if short:
        raise InvalidArgument(
            f"refusing to serve on {host}: the {short[0]} token has fewer than "
            f"{MIN_TOKEN} characters, and anyone who reaches the server could guess it. "
            "Use a long random one, e.g. $(openssl rand -base64 32)")


def _by_role(tokens: Tokens) -> Iterable[tuple[str, tuple[str, ...]]]:
    return (("admin", tokens.admin), ("read", tokens.read), ("client", tokens.client))


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` serves this machine alone."""
    import ipaddress

    if _bare(host).lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(_bare(host)).is_loopback
    except ValueError:
        return False

