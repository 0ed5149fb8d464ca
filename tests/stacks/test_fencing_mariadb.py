"""Rule 41 downstream: the MariaDB example of docs/concepts/leases.md ("Fencing a
downstream"), run as the page shows it, against a real MariaDB and real leases of hailq
on SQLite and PostgreSQL. A stale writer (a lower fencing token) is refused, the current
lease may write twice (the check is ``<=``), whether or not the connection counts found
rows instead of changed ones (MySQL counts an update that changes nothing as 0).

The page's samples need MariaDB, so the docs tests do not run them (``no-run``); this
file runs the module the page defines and its usage block, word for word."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import hailq
from docs.samples import Block, _CheckedPrint, blocks
from stacks.conftest import MARIADB, Place

PAGE = Path(__file__).resolve().parents[2] / "docs" / "concepts" / "leases.md"
MODULE = "fenced_results"


def _page_block(title: str | None, holding: str) -> Block:
    found = [b for b in blocks(PAGE) if b.language == "python" and b.title == title
             and holding in b.code]
    assert len(found) == 1, f"{PAGE.name}: one block {title or ''} with {holding!r}"
    assert not found[0].runnable  # the docs tests have no MariaDB: it runs here
    return found[0]


@pytest.fixture
def fenced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """The page's ``fenced_results.py``, importable as the usage block imports it."""
    code = _page_block(f"{MODULE}.py", "def store_result").code
    (tmp_path / f"{MODULE}.py").write_text(code, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, MODULE, raising=False)
    yield __import__(MODULE)
    sys.modules.pop(MODULE, None)


@pytest.fixture(params=[False, True], ids=["changed-rows", "found-rows"])
def results(request: pytest.FixtureRequest, mysql_place: Place) -> Iterator[Any]:
    """A connection to the test's database that counts changed rows (PyMySQL's default)
    or found rows (Django's), closed before the database is dropped even when a test
    fails inside a transaction (whose locks would hold the drop)."""
    import pymysql
    from pymysql.constants import CLIENT

    conn = pymysql.connect(**MARIADB, database=mysql_place.mysql_db,  # type: ignore[arg-type]
                           client_flag=CLIENT.FOUND_ROWS if request.param else 0)
    yield conn
    conn.close()


def _slow_and_fast(broker: hailq.Broker, claim: int) -> tuple[hailq.Message, hailq.Message]:
    """Two leases of one claim: the first ran out while its checker still worked."""
    q = broker.queue("claims")
    q.send({"claim": claim})
    (slow,) = q.receive(lease=0.2)
    time.sleep(0.3)
    (fast,) = q.receive()
    assert fast.id == slow.id and fast.fencing_token > slow.fencing_token
    return slow, fast


def test_rule_41_a_stale_writer_is_refused_and_the_current_lease_writes_twice(
        broker: hailq.Broker, results: Any, fenced: ModuleType) -> None:
    slow, fast = _slow_and_fast(broker, 8320)
    fenced.create_results_table(results)

    assert fenced.store_result(results, 8320, "photos 1-40 fine", fast.fencing_token)
    assert fenced.store_result(results, 8320, "approved", fast.fencing_token)
    assert fenced.store_result(results, 8320, "approved", fast.fencing_token)  # unchanged
    assert not fenced.store_result(results, 8320, "rejected", slow.fencing_token)

    with results.cursor() as cur:
        cur.execute("SELECT assessment, fencing_token FROM results WHERE claim = 8320")
        assert cur.fetchall() == (("approved", fast.fencing_token),)
    results.commit()
    fast.ack()


def test_rule_41_a_stale_write_before_the_new_leases_first_is_replaced(
        broker: hailq.Broker, results: Any, fenced: ModuleType) -> None:
    """What the page says a token does not do: the stale write that comes first gets
    through; the new lease's write replaces it, and the stale one is refused after."""
    slow, fast = _slow_and_fast(broker, 8321)
    fenced.create_results_table(results)

    assert fenced.store_result(results, 8321, "rejected", slow.fencing_token)
    assert fenced.store_result(results, 8321, "approved", fast.fencing_token)
    assert not fenced.store_result(results, 8321, "rejected", slow.fencing_token)
    with results.cursor() as cur:
        cur.execute("SELECT assessment FROM results WHERE claim = 8321")
        assert cur.fetchall() == (("approved",),)
    results.commit()


def test_the_pages_usage_sample_prints_what_it_says(
        broker: hailq.Broker, mysql_place: Place, fenced: ModuleType) -> None:
    usage = _page_block(None, "store_result(results")
    slow, fast = _slow_and_fast(broker, 8320)
    assert 'database="test"' in usage.code  # the page's database, this test's own here
    code = usage.code.replace('database="test"', f'database="{mysql_place.mysql_db}"')
    checked = _CheckedPrint(usage)
    namespace: dict[str, Any] = {"slow": slow, "fast": fast, "print": checked}

    try:
        exec(compile(code, usage.where(), "exec"), namespace)
        checked.verify()
    finally:
        if "results" in namespace:  # the sample's own connection
            namespace["results"].close()
    assert fast.settled
