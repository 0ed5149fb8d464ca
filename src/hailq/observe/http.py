"""The request handler both metrics endpoints share (the worker's and ``hailq metrics``')."""

from __future__ import annotations

import logging
from http.server import BaseHTTPRequestHandler


class PlainHandler(BaseHTTPRequestHandler):
    """Answers with whole bodies of a known length; logs each request at debug level only."""

    logger = logging.getLogger("hailq.metrics")

    def _send(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        self.logger.debug("%s " + format, self.address_string(), *args)
