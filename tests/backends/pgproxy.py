"""A loopback TCP relay in front of the test server that can lose one reply, or go down.

``lose_next_reply()`` makes the relay close the client's connection as soon as
the server answers, without passing the answer on: the statement ran (and, in
autocommit, committed) but the client only sees a broken connection, the
failure whose outcome a client cannot know.

``cut()`` takes the relay down: every connection through it is closed and new
ones are refused, as when the server's host or the network in between goes away;
``restore()`` listens on the same port again.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from urllib.parse import urlsplit, urlunsplit


class ReplyLosingProxy:
    def __init__(self, target_url: str) -> None:
        parts = urlsplit(target_url)
        self._target = (parts.hostname or "127.0.0.1", parts.port or 5432)
        self._listener = socket.create_server(("127.0.0.1", 0))
        port = self._port = self._listener.getsockname()[1]
        netloc = f"{parts.username}@127.0.0.1:{port}" if parts.username else f"127.0.0.1:{port}"
        self.url = urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))
        self._lose = threading.Event()
        self._after: bytes | None = None  # lose the reply to a request holding these bytes
        self.lost = 0
        self._sockets: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def lose_next_reply(self, after: bytes | None = None) -> None:
        """Lose the server's next answer; with ``after`` (e.g. ``b"COMMIT"``), its answer
        to the next request that holds those bytes."""
        if after is None:
            self._lose.set()
        else:
            self._after = after

    def cut(self) -> None:
        """Close every connection through the relay and refuse new ones."""
        with contextlib.suppress(OSError):  # wakes the accepting thread (close alone won't)
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        sockets, self._sockets = self._sockets, []
        for s in sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                s.close()

    def restore(self) -> None:
        """Accept connections again, on the same port."""
        self._listener = socket.create_server(("127.0.0.1", self._port))
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        listener = self._listener
        while not self._closed:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            server = socket.create_connection(self._target)
            self._sockets += [client, server]
            threading.Thread(target=self._pump, args=(client, server, False),
                             daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, True),
                             daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, replies: bool) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if not replies and self._after is not None and self._after in data:
                    self._after = None
                    self._lose.set()
                if replies and self._lose.is_set():
                    self._lose.clear()
                    self.lost += 1
                    break  # the server answered; the client never hears it
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                s.close()

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        for s in self._sockets:
            with contextlib.suppress(OSError):
                s.close()
