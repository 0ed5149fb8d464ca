"""``hailq serve``: the HTTP API and the dashboard on uvicorn (rule 29).

The tokens come from ``--token`` (admin) and the environment (this is the CLI: the
only place that reads it): ``HAILQ_SERVE_TOKEN`` (admin), ``HAILQ_SERVE_READ_TOKEN``
and ``HAILQ_SERVE_CLIENT_TOKEN``; each may hold several, comma-separated.
"""

from __future__ import annotations

import os
import secrets
import socket
from urllib.parse import quote

import click

from hailq.cli.context import common_options, current_app
from hailq.cli.output import note

ENV_TOKENS = {"admin": "HAILQ_SERVE_TOKEN", "read": "HAILQ_SERVE_READ_TOKEN",
              "client": "HAILQ_SERVE_CLIENT_TOKEN"}
DEFAULT_PORT = 8642


def _env_tokens(name: str) -> tuple[str, ...]:
    return tuple(t.strip() for t in os.environ.get(name, "").split(",") if t.strip())


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind. Any address but loopback needs a token.")
@click.option("--port", type=click.IntRange(0, 65535), default=DEFAULT_PORT,
              show_default=True, help="Port to bind (0: any free one).")
@click.option("--token", metavar="TOKEN",
              help="The admin token [env HAILQ_SERVE_TOKEN]; without one on loopback a "
                   "random one is made and a login link printed. Off loopback every "
                   "token needs at least 16 characters.")
@click.option("--allow-host", "allow_hosts", metavar="NAME", multiple=True,
              help="Another Host name this server answers for (the name clients use, "
                   "e.g. behind a proxy); '*' for any. Repeatable.")
@click.option("--certfile", type=click.Path(exists=True, dir_okay=False),
              help="TLS certificate (PEM): serve HTTPS.")
@click.option("--keyfile", type=click.Path(exists=True, dir_okay=False),
              help="TLS private key (PEM) of --certfile.")
@click.option("--max-body", type=click.IntRange(1024, 256 * 1024 * 1024),
              default=2 * 1024 * 1024, show_default=True,
              help="Largest request body in bytes; larger ones get 413 unread.")
@click.option("--read-timeout", type=click.FloatRange(1, 3600), default=20.0,
              show_default=True,
              help="Seconds a request's headers, and then its body, have to arrive; a "
                   "slower connection is closed (headers) or answered 408 (body).")
@common_options
def serve(host: str, port: int, token: str | None, allow_hosts: tuple[str, ...],
          certfile: str | None, keyfile: str | None, max_body: int,
          read_timeout: float) -> None:
    """Serve the HTTP API (and the dashboard) for any language.

    JSON in and out under /api, the OpenAPI document at /openapi.json,
    /healthz and /metrics. Binds 127.0.0.1 unless --host says otherwise, and
    refuses any other address without a token, or with one of fewer than 16
    characters. Tokens have roles: admin (every
    action), read (looks only) and client (send, receive, ack, nack, extend,
    publish). Send them as 'Authorization: Bearer TOKEN'; a browser logs in once
    through the printed link and keeps the token in an HttpOnly cookie. Read and
    client tokens come from HAILQ_SERVE_READ_TOKEN and HAILQ_SERVE_CLIENT_TOKEN
    (several may be given, comma-separated). See docs/guides/http-api.md.
    """
    import uvicorn

    from hailq.errors import InvalidArgument
    from hailq.runtime.levels import LevelsRecorder
    from hailq.runtime.maintenance import Maintenance
    from hailq.runtime.service import Services
    from hailq.serve import Tokens, create_app
    from hailq.serve.app import close_app
    from hailq.serve.protocol import server_config
    from hailq.serve.security import check_tokens, is_loopback

    if (certfile is None) != (keyfile is None):
        raise click.UsageError("give --certfile and --keyfile together")
    admin = (token,) if token else _env_tokens(ENV_TOKENS["admin"])
    tokens = Tokens(admin, _env_tokens(ENV_TOKENS["read"]), _env_tokens(ENV_TOKENS["client"]))
    made = None
    if not tokens.admin and is_loopback(host):  # made for this run's login link
        made = secrets.token_urlsafe(32)
        tokens = Tokens((made,), tokens.read, tokens.client)
    elif not tokens:  # elsewhere read or client tokens alone may serve, nothing may not
        raise click.UsageError(
            f"refusing to serve on {host} without a token: anyone who reaches it could "
            "read and change every queue. Give --token (or HAILQ_SERVE_TOKEN), or bind "
            "127.0.0.1 and put a proxy with TLS in front")
    try:
        check_tokens(tokens, host)
    except InvalidArgument as exc:
        raise click.UsageError(str(exc)) from None

    app_options = current_app()
    sock = _bind(host, port)
    scheme = "https" if certfile else "http"
    shown = f"[{host}]" if ":" in host else host
    base = f"{scheme}://{shown}:{sock.getsockname()[1]}"
    with app_options.broker() as broker:
        app = create_app(broker, tokens=tokens, host=host, allow_hosts=allow_hosts,
                         max_body=max_body, read_timeout=read_timeout)
        note(f"serving {broker.url} on {base} (API under /api, OpenAPI at "
             "/openapi.json); Ctrl-C to stop")
        if made is not None:
            click.echo(f"Open the dashboard with this login link (it holds the admin token "
                       f"of this run):\n    {base}/login?token={quote(made)}")
            click.echo(f"Scripts send: Authorization: Bearer {made}")
        config = server_config(app, read_timeout=read_timeout, ssl_certfile=certfile,
                               ssl_keyfile=keyfile, timeout_graceful_shutdown=5)
        # The dashboard's charts' history, and the broker's housekeeping.
        services = Services([LevelsRecorder(broker), Maintenance(broker)])
        services.start()
        try:
            uvicorn.Server(config).run(sockets=[sock])
        finally:
            services.close()
            close_app(app)  # the figures of the last second (lifespan is off)


def _bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound before the broker is opened: a taken port fails at
    once with a clear message, and --port 0 shows the port it got."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named outright: asyncio turns Nagle off (TCP_NODELAY) only on sockets
    # that say so, and with Nagle on every small answer waits 40 ms for a delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise click.ClickException(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


COMMANDS = [serve]
