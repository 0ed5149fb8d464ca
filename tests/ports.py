"""Loopback ports for the servers the tests start (PostgreSQL, PgBouncer, Patroni, HTTP)."""

from __future__ import annotations

import random
import socket
import threading
from pathlib import Path

_given: set[int] = set()
_lock = threading.Lock()


def _below_ephemeral() -> range:
    """Ports under the kernel's range for outgoing connections. A port from that range
    can become some connection's source port between the moment it is found free and
    the moment the server binds it (seen as a server that never came up)."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    return range(max(1024, low - 12000), low)


def free_port() -> int:
    """A loopback port free now, not handed out before by this process, and outside
    the range the kernel picks source ports from."""
    ports = _below_ephemeral()
    with _lock:
        for _ in range(2000):
            port = random.choice(ports)
            if port in _given:
                continue
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
            _given.add(port)
            return port
    raise RuntimeError(f"no free loopback port in {ports.start}-{ports.stop - 1}")
