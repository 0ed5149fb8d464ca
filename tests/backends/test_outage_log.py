"""An outage in the log (issue 33, point 7): the throttle on a clock of the test's own, and
psycopg's pool warnings about hailq's pools folded into it. The worker through a relay
that goes down is in tests/runtime/test_worker_outage.py."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator

import pytest
from psycopg_pool import ConnectionPool, PoolTimeout

from hailq.backends.postgres.poollog import PoolLogs
from hailq.errors import StorageError
from hailq.outage import Outage, covers


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def lines() -> Iterator[list[str]]:
    """What the log says at INFO and above, one string a record, from any logger."""
    root = logging.getLogger()
    handler, level = _Lines(), root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    yield handler.lines
    root.removeHandler(handler)
    root.setLevel(level)


def test_one_line_when_it_goes_one_every_30_s_while_it_lasts_and_one_when_it_comes_back(
        clock: Clock, lines: list[str]) -> None:
    outage = Outage("PostgreSQL postgresql://app:***@db/prod", logging.getLogger("t.outage"),
                    clock=clock)
    outage.failed("refused")  # never reached yet: the caller's own error says it
    outage.reached()
    outage.succeeded()
    assert lines == [] and not outage.down

    outage.failed("connection refused", attempt=True)
    assert lines == ["PostgreSQL postgresql://app:***@db/prod is unreachable: connection "
                     "refused; hailq keeps trying, and says so here at most every 30 s "
                     "until it answers"]
    assert outage.down and covers(StorageError("x")) and not covers(ValueError("x"))
    for _ in range(1, 30):  # a failing call and three attempts a second: no line
        clock.now += 1
        outage.failed("no connection within 5 s")
        for _ in range(3):
            outage.failed("connection refused", attempt=True)
    assert len(lines) == 1
    clock.now += 1  # 30 s since the first line
    outage.failed("no connection within 5 s")
    assert lines[1:] == ["PostgreSQL postgresql://app:***@db/prod still unreachable after "
                         "30 s: connection refused (30 calls and 87 connection attempts "
                         "failed in the last 30 s)"]
    clock.now += 29.5
    outage.failed("timeout expired", attempt=True)
    assert len(lines) == 2
    clock.now += 0.5
    outage.failed("no connection within 5 s")  # no attempt since the last line
    assert lines[2] == ("PostgreSQL postgresql://app:***@db/prod still unreachable after "
                        "60 s: timeout expired (1 call and 1 connection attempt failed in "
                        "the last 30 s)")

    clock.now += 5.25
    outage.succeeded()
    assert lines[3:] == ["PostgreSQL postgresql://app:***@db/prod reconnected after 65.2 s "
                         "(31 calls and 89 connection attempts failed meanwhile)"]
    outage.succeeded()
    # (covers() speaks for every database of the process: other tests leave theirs.)
    assert len(lines) == 4 and not outage.down
    # A call the outage held up past its deadline fails after the reconnect: no new one.
    outage.failed("no answer within 5 s", began=clock.now - 4)
    assert len(lines) == 4 and not outage.down

    clock.now += 100  # the next outage starts from nothing
    outage.failed("server closed the connection unexpectedly")
    # A call begun before it, on a connection the cut had not reached yet, goes through
    # after it began: that is no return of the database.
    outage.succeeded(began=clock.now - 0.01)
    assert outage.down
    clock.now += 2
    outage.succeeded(began=clock.now - 0.5)
    assert lines[4:] == [
        "PostgreSQL postgresql://app:***@db/prod is unreachable: server closed the "
        "connection unexpectedly; hailq keeps trying, and says so here at most every 30 s "
        "until it answers",
        "PostgreSQL postgresql://app:***@db/prod reconnected after 2.0 s (1 call failed "
        "meanwhile)"]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nobody listens there once it is closed


def _failing_pool(name: str, configure: object = None) -> ConnectionPool:
    pool: ConnectionPool = ConnectionPool(
        f"host=127.0.0.1 port={_closed_port()} connect_timeout=2", min_size=1, open=True,
        name=name, configure=configure, reconnect_timeout=0)  # type: ignore[arg-type]
    with pytest.raises(PoolTimeout):  # makes the pool try to connect again
        pool.getconn(timeout=0.3)
    return pool


def test_the_pools_failed_attempts_are_counted_into_the_outage_not_logged_one_by_one(
        lines: list[str]) -> None:
    outage = Outage("PostgreSQL postgresql://127.0.0.1/x", logging.getLogger("t.outage"))
    outage.reached()
    logs = PoolLogs(outage)
    ours = _failing_pool(logs.name("fast"), logs.configure)
    try:
        theirs = _failing_pool("someone-elses")
        theirs.close()
    finally:
        ours.close()
    hailq_pool = [line for line in lines if "hailq-fast" in line]
    assert hailq_pool == [], lines
    assert [line for line in lines if "someone-elses" in line], lines  # theirs kept theirs
    (unreachable,) = [line for line in lines if "unreachable" in line]
    assert unreachable.startswith("PostgreSQL postgresql://127.0.0.1/x is unreachable: "
                                  "connection failed: connection to server at "), unreachable
    assert "Connection refused" in unreachable
    assert outage.down and outage._all_attempts >= 2
