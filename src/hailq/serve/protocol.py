"""How ``hailq serve`` runs on uvicorn: HTTP/1.1 (h11) with a deadline for a request's
headers, which uvicorn does not have.

uvicorn closes an idle keep-alive connection after ``timeout_keep_alive`` seconds, but
any byte that arrives cancels that timer: a client that sends its headers one byte
every few seconds (slow loris) would hold its connection for ever. Here the headers
of each request must be complete within ``read_timeout`` seconds of the connection's
start (or of the previous response), else the connection is closed. The body has its
own deadline in the security middleware (``Policy.read_timeout``), where it is read.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

DEFAULT_READ_TIMEOUT = 20.0
KEEP_ALIVE = 5  # seconds an idle connection is kept between requests


class DeadlineH11Protocol(H11Protocol):
    """h11 as uvicorn runs it, with a deadline for each request's headers."""

    read_timeout = DEFAULT_READ_TIMEOUT
    _headers_due: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:  # the headers are in
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self._arm()  # the next request's headers have the same time

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._headers_due = self.loop.call_later(self.read_timeout, self._too_slow)

    def _disarm(self) -> None:
        if self._headers_due is not None:
            self._headers_due.cancel()
            self._headers_due = None

    def _too_slow(self) -> None:
        self._headers_due = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.logger.info("closing a connection whose request headers took over %g s",
                             self.read_timeout)
            self.transport.close()


def protocol(read_timeout: float) -> type[DeadlineH11Protocol]:
    """The protocol class with headers due within ``read_timeout`` seconds."""
    return type("DeadlineH11", (DeadlineH11Protocol,), {"read_timeout": read_timeout})


def server_config(app: Any, *, read_timeout: float = DEFAULT_READ_TIMEOUT,
                  **options: Any) -> uvicorn.Config:
    """uvicorn's configuration for ``app`` (hailq's app: its body deadline is the
    app's ``read_timeout``); ``options`` go to ``uvicorn.Config``."""
    options.setdefault("access_log", False)
    options.setdefault("log_level", "warning")
    options.setdefault("lifespan", "off")
    return uvicorn.Config(app, http=protocol(read_timeout), timeout_keep_alive=KEEP_ALIVE,
                          **options)
