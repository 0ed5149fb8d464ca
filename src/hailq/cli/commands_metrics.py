"""``hailq metrics``: the queues' figures as Prometheus metrics, printed or served."""

from __future__ import annotations

import contextlib
import sys

import click

from hailq.cli.context import current_app, options_with
from hailq.cli.output import note

DEFAULT_LISTEN = "127.0.0.1:9464"


def _address(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise click.BadParameter(f"give HOST:PORT such as {DEFAULT_LISTEN}, got {value!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


@click.command("metrics")
@click.option("--listen", metavar="HOST:PORT", is_flag=False, flag_value=DEFAULT_LISTEN,
              help=f"Serve /metrics and /desired_workers over HTTP instead of printing "
                   f"once (--listen alone: {DEFAULT_LISTEN}).")
@options_with("Broker URL, sqlite:///path.db or postgresql://user@host:port/db "
              "[env HAILQ_URL; default sqlite:///hailq.db].",
              "Print once what GET /desired_workers answers (JSON) instead of the "
              "Prometheus text.")
def metrics(listen: str | None) -> None:
    """Print every queue's figures in Prometheus' text format, or serve them.

    With --listen, a small exporter answers GET /metrics (Prometheus text),
    GET /desired_workers (JSON; ?queue=NAME for one queue, whose
    "desired_workers" field KEDA's metrics-api trigger reads) and GET /healthz.
    Every series is queue-wide and read from the database per request, so one
    exporter per database is enough and several report the same. It only reads;
    bind it beyond 127.0.0.1 only behind your network's protection. With --json
    (and no --listen) it prints the /desired_workers document once, since
    Prometheus' text is no JSON; 'hailq stats --json' has every figure.
    """
    from hailq.observe.prometheus import collect_figures, desired_workers_of, exposition

    app = current_app()
    if listen is None:
        with app.broker() as broker:
            figures = collect_figures(broker)
            if app.out.json:
                app.out.emit_json(desired_workers_of(figures, None))
                return
            sys.stdout.buffer.write(exposition(figures))
            sys.stdout.flush()
        return
    from hailq.observe.exporter import make_server

    host, port = _address(listen)
    with app.broker() as broker:
        server = make_server(host, port, lambda: collect_figures(broker))
        note(f"serving /metrics and /desired_workers on http://{host}:"
             f"{server.server_address[1]} for {broker.url}; Ctrl-C to stop")
        with contextlib.suppress(KeyboardInterrupt):
            server.serve_forever(poll_interval=0.5)
        server.server_close()


COMMANDS = [metrics]
