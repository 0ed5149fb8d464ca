"""Rule 41 in PostgreSQL's ``desired_workers`` view: for a queue in deadline order it
gives the pool the Python side found (``Queue.figures()``), as the maintenance duty
``deadline_pools`` stored it in the last minute; without a fresh one, migration 5's
figure. SQLite has no such view: the duty stores nothing there."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

import hailq
from hailq.backends.base import FiguresRecordParams, RateAdd
from hailq.internal import ops
from hailq.models import AutoscalerInfo
from hailq.runtime.maintenance import UPKEEP, Maintenance, Upkeep
from waiting import wait_for

SLO = {9: 10, 5: 60, 0: 3600}
DUTY = next(d for d in UPKEEP if d.name == "deadline_pools")


class View:
    """The view's rows, read with plain SQL as KEDA's postgresql trigger reads them."""

    def __init__(self, url: str) -> None:
        self.schema = url.rsplit("schema=", 1)[1].split("&")[0]
        self.conn = psycopg.connect(url.split("?")[0], autocommit=True)

    def __call__(self, queue: str) -> tuple[Any, ...]:
        found = self.conn.execute(
            f"SELECT desired_workers, pool_reason, pool_at FROM {self.schema}.desired_workers"
            " WHERE queue = %s", (queue,)).fetchone()
        assert found is not None
        return tuple(found)

    def execute(self, sql: str, *args: object) -> None:
        self.conn.execute(sql.replace("{schema}", self.schema), args)


@pytest.fixture
def pg(pg_url: str) -> Iterator[tuple[hailq.Broker, View]]:
    broker = hailq.connect(pg_url)
    view = View(pg_url)
    try:
        yield broker, view
    finally:
        view.conn.close()
        broker.close()


def backlog(broker: hailq.Broker, view: View, name: str, order: str) -> hailq.Queue:
    """100 messages of priority 5 waiting, 1 s handlers measured, nothing sent lately."""
    q = broker.queue(name, slo=SLO, order=order)
    q.send_many([hailq.Envelope(n, priority=5) for n in range(100)])
    broker.backend.figures_record(FiguresRecordParams(
        rates=[RateAdd(queue=name, priority=5, started=20, acked=20, handler_total=20.0)],
        sampled=[]))
    view.execute("UPDATE {schema}.queues SET created_at = created_at - 7200 WHERE name = %s",
                 name)
    view.execute("UPDATE {schema}.sends SET slot = slot - 720 WHERE queue = %s", name)
    return q


@pytest.mark.postgres
def test_rule_41_the_view_gives_the_pool_the_figures_find_for_a_deadline_queue(
        pg: tuple[hailq.Broker, View]) -> None:
    broker, view = pg
    q = backlog(broker, view, "claims", "deadline")
    strict = backlog(broker, view, "strict", "priority")
    # Before any turn of the duty the view has only migration 5's figure: the backlog
    # drained within the tightest target (100 x 1 s in 10 s).
    assert view("claims") == (10, None, None)
    assert q.figures().desired_workers == 2  # 100 runs of 1 s due within 60 s

    service = Maintenance(broker, [DUTY], look=0.05)  # as every worker runs it
    wait_for(lambda: service.tick() is not None and "deadline_pools" in service.done, 10,
             "a turn of the duty")
    desired, reason, at = view("claims")
    assert (desired, reason) == (q.figures().desired_workers, None) == (2, None)
    assert at == pytest.approx(broker.now(), abs=5)
    # A queue in priority order keeps the view's own figure, as its figures do.
    assert view("strict") == (strict.figures().desired_workers, None, None) == (10, None, None)

    # The autoscalers' saturation point caps it in both.
    ops(broker).record_autoscale(AutoscalerInfo("h:1:claims", "claims", "h", 1, 1, 1, "hold",
                                           "test", 0.0, 1))
    assert view("claims")[0] == q.figures().desired_workers == 1

    # Stored more than a minute ago: not fresh, the view's own figure again.
    view.execute("UPDATE {schema}.deadline_pools SET at = at - 61")
    view.execute("DELETE FROM {schema}.autoscale")
    assert view("claims")[:2] == (10, None)


@pytest.mark.postgres
def test_rule_41_the_view_says_why_no_pool_meets_every_target(
        pg: tuple[hailq.Broker, View]) -> None:
    broker, view = pg
    q = backlog(broker, view, "claims", "deadline")
    q.send("late", priority=9)
    view.execute("UPDATE {schema}.messages SET available_at = available_at - 100, "
                 "sort_key = sort_key - 100 WHERE priority = 9")
    assert ops(broker).store_deadline_pools() == 1
    figures = q.figures()
    assert figures.desired_workers_reason is not None
    assert figures.desired_workers_reason.startswith("late: 1 ready message(s)")
    assert view("claims")[:2] == (figures.desired_workers, figures.desired_workers_reason)


def test_rule_41_sqlite_keeps_no_pools(sqlite_url: str) -> None:
    with hailq.connect(sqlite_url) as broker:
        broker.queue("claims", slo=SLO, order="deadline").send("a", priority=5)
        assert not broker.backend.deadline_pools_kept()
        assert ops(broker).store_deadline_pools() == 0
        assert Upkeep("deadline_pools", 1.0, run=DUTY.run).work(broker) == 0
