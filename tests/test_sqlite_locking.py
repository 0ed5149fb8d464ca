"""SQLite lets one connection write at a time: what a user sees when their own
transaction, opened by ``send(connection=...)``, is left open."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import hailq


def test_a_transaction_left_open_after_send_names_itself_and_loses_nothing(
        tmp_path: Path) -> None:
    path = tmp_path / "claims.db"
    queue = hailq.connect(f"sqlite:///{path}?busy_timeout=0.3").queue("claims")
    portal = sqlite3.connect(path)  # Python's default: a transaction opens at the first write
    queue.send({"claim": 8331}, connection=portal)  # ...and is still open: no commit yet

    with pytest.raises(hailq.StorageError, match="a transaction of yours left open") as caught:
        queue.send({"claim": 8332})
    assert str(path) in str(caught.value)

    portal.commit()
    queue.send({"claim": 8332})
    assert [m.body for m in queue.receive(max_messages=5)] == [{"claim": 8331}, {"claim": 8332}]
    portal.close()
