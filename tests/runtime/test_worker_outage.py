"""A database outage in a worker's log (issue 33, point 7): one line when it begins, one
when it ends, nothing from the driver's pool and no line per failed receive in between.

The worker reaches PostgreSQL through a relay that the test takes down for 12 s, long
enough for every loop of the worker to fail a few times (the code before wrote over 500
lines for it). On SQLite another connection holds the write lock past the worker's
``busy_timeout``. The throttle's 30-s cadence is tested on a clock of its own in
tests/backends/test_outage_log.py.
"""

from __future__ import annotations

import re
import signal
import sqlite3
import time
from pathlib import Path

import pytest

import hailq
from backends.pgproxy import ReplyLosingProxy

from .conftest import StartWorker
from .support import done, wait_for

CUT = 12.0  # seconds the database is out of the worker's reach
LOCKED = 6.0  # seconds the SQLite file stays locked (its calls fail after 1 s each)


@pytest.mark.parametrize("backend_name", ["postgres"])
def test_an_outage_makes_one_line_when_it_begins_and_one_when_it_ends(
        url: str, broker: hailq.Broker, start_worker: StartWorker, effects: str,
        tmp_path: Path) -> None:
    relay = ReplyLosingProxy(url)
    # A password the server (trust) ignores and the log must not show.
    through = relay.url.replace("postgres@", "postgres:s3cret@", 1) + "&timeout=5"
    q = broker.queue("outage", lease=5)
    worker = start_worker("handlers:work", "-q", "outage", "--url", through,
                          log_name="worker-outage.log")
    log_path = tmp_path / "worker-outage.log"
    q.send({"n": 1})
    wait_for(lambda: q.stats().acked == 1, what="the first message handled")
    try:
        relay.cut()
        cut_at = time.monotonic()
        for n in range(2, 6):  # sent meanwhile, past the relay
            q.send({"n": n})
        wait_for(lambda: "unreachable" in log_path.read_text(), timeout=CUT,
                 what="the outage's first line")
        time.sleep(max(CUT - (time.monotonic() - cut_at), 0))
        relay.restore()
        wait_for(lambda: done(effects) == [1, 2, 3, 4, 5], timeout=30,
                 what="the messages sent during the outage handled")
        wait_for(lambda: "reconnected after" in log_path.read_text(), timeout=10,
                 what="the reconnected line")
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(30) == 0
    finally:
        relay.close()  # (after the worker: its last writes go through the relay)
    log = log_path.read_text()
    assert not [line for line in log.splitlines() if "psycopg" in line], log
    assert "s3cret" not in log
    # Nothing in between (at most a line every 30 s: none in 12 s), and nothing else above
    # INFO from start to end: the failed receives, figures, registry and scheduler writes
    # of the outage are in its two lines, and so are the pool's hundreds of warnings.
    down, up, took = _outage_lines(log, "unreachable", "reconnected")
    shown = re.escape(relay.url.replace("postgres@", "postgres:***@", 1) + "&timeout=5")
    assert re.search(rf" WARNING hailq\.postgres: PostgreSQL {shown} is unreachable: "
                     r".+; hailq keeps trying", down), down
    attempts = re.search(rf" WARNING hailq\.postgres: PostgreSQL {shown} reconnected after "
                         r".* and (\d+) connection attempts? failed meanwhile\)$", up)
    assert attempts and int(attempts[1]) > 0, up
    assert CUT - 1 <= took <= CUT + 10, up


def _outage_lines(log: str, lost: str, back: str) -> tuple[str, str, float]:
    """The outage's two lines, checked to be the only ones above INFO; and how long it
    lasted as the second says."""
    lines = log.splitlines()
    downs = [i for i, line in enumerate(lines) if f" is {lost}: " in line]
    ups = [i for i, line in enumerate(lines) if f" {back} after " in line]
    assert len(downs) == 1 and len(ups) == 1, log  # one outage: the whole log if not
    (down,), (up,) = downs, ups
    assert up == down + 1, "\n".join(lines[down:up + 1])
    loud = [line for line in lines if re.search(r" (WARNING|ERROR|CRITICAL) ", line)]
    assert loud == [lines[down], lines[up]], log
    took = re.search(r" after (\d+\.\d) s \(\d+ calls?( and \d+ connection attempts?)? "
                     r"failed meanwhile\)$", lines[up])
    assert took, lines[up]
    return lines[down], lines[up], float(took[1])


@pytest.mark.parametrize("backend_name", ["sqlite"])
def test_a_sqlite_file_locked_past_busy_timeout_makes_one_line_then_one_when_it_is_free(
        url: str, broker: hailq.Broker, start_worker: StartWorker, effects: str,
        tmp_path: Path) -> None:
    q = broker.queue("outage", lease=5)
    worker = start_worker("handlers:work", "-q", "outage", "--url", url + "?busy_timeout=1",
                          log_name="worker-outage.log")
    log_path = tmp_path / "worker-outage.log"
    q.send({"n": 1})
    wait_for(lambda: q.stats().acked == 1, what="the first message handled")
    path = url.removeprefix("sqlite:///")
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")  # the write lock, for LOCKED seconds
        locked_at = time.monotonic()
        for n in range(2, 6):  # committed with the lock's transaction
            q.send({"n": n}, connection=holder)
        wait_for(lambda: "unavailable" in log_path.read_text(), timeout=LOCKED,
                 what="the outage's first line")
        time.sleep(max(LOCKED - (time.monotonic() - locked_at), 0))
        holder.execute("COMMIT")
    finally:
        holder.close()
    wait_for(lambda: done(effects) == [1, 2, 3, 4, 5], timeout=30,
             what="the messages sent during the outage handled")
    wait_for(lambda: "available again after" in log_path.read_text(), timeout=10,
             what="the line that says the file is free again")
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(30) == 0

    down, up, took = _outage_lines(log_path.read_text(), "unavailable", "available again")
    assert re.search(rf" WARNING hailq\.sqlite: SQLite database {re.escape(path)} is "
                     r"unavailable: still busy after 1 s: another connection holds the "
                     r"write lock .*; hailq keeps trying", down), down
    assert " WARNING hailq.sqlite: SQLite database " in up
    assert 1 <= took <= LOCKED + 10, up  # from the first call that failed, after 1 s
