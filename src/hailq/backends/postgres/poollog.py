"""psycopg's pool warnings about hailq's own pools, folded into hailq's outage report.

While the database is away, each pool logs every failed connection attempt twice (a
few a second per waiting caller) and every broken connection it drops: hundreds of
lines for a 15-second outage, saying what the outage line already says. A filter on
the ``psycopg.pool`` logger counts the failed attempts into the pool's ``Outage`` and
drops those lines; the pools of anyone else in the process keep their warnings.
A dropped broken connection says nothing either: the call that found it retries on
a fresh one, and if that fails too, the outage is reported.
"""

from __future__ import annotations

import itertools
import logging
import threading
import weakref
from typing import Any

import psycopg

from hailq.outage import Outage

_BY_POOL: weakref.WeakValueDictionary[str, Outage] = weakref.WeakValueDictionary()
_BY_CONN: weakref.WeakKeyDictionary[psycopg.Connection[Any], Outage] = \
    weakref.WeakKeyDictionary()
_serial = itertools.count(1)
_installing = threading.Lock()
_installed = False


class PoolLogs:
    """Names a backend's pools and marks their connections, so the filter knows whose
    outage their warnings belong to."""

    def __init__(self, outage: Outage) -> None:
        self._outage = outage

    def name(self, kind: str) -> str:
        """A name for a new pool, unique in the process (its warnings carry only that)."""
        _install()
        name = f"hailq-{kind}-{next(_serial)}"
        _BY_POOL[name] = self._outage
        return name

    def configure(self, conn: psycopg.Connection[Any]) -> None:
        """The pool's ``configure``: a warning about a broken connection names only it."""
        _BY_CONN[conn] = self._outage


class _Fold(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING or not isinstance(record.args, tuple) \
                or not record.args:
            return True
        text, first = str(record.msg), record.args[0]
        if text.startswith(("error connecting in", "reconnection attempt in pool")):
            outage = _BY_POOL.get(first) if isinstance(first, str) else None
            if outage is None:
                return True
            if text.startswith("error connecting") and len(record.args) > 1:
                # (the other line always follows this one: hailq's pools give up on
                # each attempt at once, reconnect_timeout=0, and callers ask again)
                outage.failed(_first_line(record.args[1]), attempt=True)
            return False
        if text.startswith(("discarding broken connection", "discarding closed connection")):
            return not (isinstance(first, psycopg.Connection) and first in _BY_CONN)
        return True


def _install() -> None:
    global _installed
    with _installing:
        if not _installed:
            logging.getLogger("psycopg.pool").addFilter(_Fold())
            _installed = True


def _first_line(exc: object) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__
