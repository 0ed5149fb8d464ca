"""A small exporter, the way RabbitMQ's is: ``/metrics`` in Prometheus' text format
and ``/desired_workers`` as JSON (``?queue=NAME`` for one queue's, what KEDA's
``metrics-api`` trigger reads with ``valueLocation: desired_workers``). It only
reads, answers GET alone, and binds 127.0.0.1 unless told otherwise."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from http.server import ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from hailq.observe.figures import QueueFigures
from hailq.observe.http import PlainHandler
from hailq.observe.prometheus import CONTENT_TYPE, desired_workers_of, exposition
from hailq.outage import covers

log = logging.getLogger("hailq.metrics")

Source = Callable[[], list[QueueFigures]]


def make_server(host: str, port: int, source: Source) -> ThreadingHTTPServer:
    """An HTTP server serving the figures ``source`` returns at each request; the
    caller runs ``serve_forever()`` and ``shutdown()``. Reads are serialised: one look
    at the database at a time, however many scrapers come."""
    lock = threading.Lock()

    class Handler(PlainHandler):
        server_version = "hailq-exporter"

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            try:
                if url.path == "/metrics":
                    with lock:
                        body = exposition(source())
                    self._send(200, CONTENT_TYPE, body)
                elif url.path == "/desired_workers":
                    with lock:
                        found = source()
                    wanted = parse_qs(url.query).get("queue")
                    doc = desired_workers_of(found, wanted[0] if wanted else None)
                    if doc is None:
                        self._send(404, "application/json",
                                   json.dumps({"error": "no such queue"}).encode())
                        return
                    self._send(200, "application/json", json.dumps(doc).encode())
                elif url.path in ("/", "/healthz"):
                    self._send(200, "text/plain; charset=utf-8", b"ok\n")
                else:
                    self._send(404, "text/plain; charset=utf-8", b"not found\n")
            except Exception as exc:  # the database is away: say so, stay up
                if not covers(exc):  # an outage has lines of its own (hailq/outage.py)
                    log.warning("could not read the figures: %s", exc)
                self._send(503, "text/plain; charset=utf-8",
                           f"could not read the figures: {type(exc).__name__}\n".encode())

    return ThreadingHTTPServer((host, port), Handler)
