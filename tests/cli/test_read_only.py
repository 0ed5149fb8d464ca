"""Rule 30: the commands that look never write, so a PostgreSQL role that may only read
hailq's tables can run them (an operator's or a dashboard's login), while the work
goes on, and nothing it looks at changes."""

from __future__ import annotations

import time

import psycopg
from psycopg import sql

import hailq
from hailq.internal import ops
from waiting import wait_past

from .conftest import run_hailq

LOOKS = [["workers"], ["queues"], ["topics"], ["stats"], ["stats", "claims"],
         ["peek", "claims"], ["dead", "claims"], ["metrics"]]


def test_rule_30_a_role_that_may_only_read_can_run_every_look(
        pg_url: str, reader_url: str) -> None:
    with hailq.connect(pg_url) as broker:
        claims = broker.queue("claims", lease=0.5, max_attempts=1)
        claims.send({"claim": 1})
        [held] = claims.receive()  # its lease ends unseen: dead, but nobody wrote that yet
        claims.send({"claim": 2}, delay=0.5)
        due = max(held.lease_until, broker.now() + 0.5)
        claims.send({"claim": 3}, priority=5)
        broker.topic("storms").subscribe("claims")
        ops(broker).save_worker(hailq.WorkerInfo(
            id="w-1", host="img-01", pid=101, queues=["claims"], concurrency=4, in_flight=0,
            started_at=time.time(), last_seen=0.0, state="running"))
        wait_past(broker.now, due)

    for look in LOOKS:
        result = run_hailq(*look, "--json", url=reader_url)
        assert result.code == 0, (look, result.err)
    [dead] = run_hailq("dead", "claims", "--json", url=reader_url).json()
    shown = run_hailq("show", "claims", dead["id"], "--json", url=reader_url).json()
    assert (shown["state"], shown["errors"][-1]["error"]) == ("dead", "lease expired")
    assert run_hailq("configure", "claims", "--json", url=reader_url).json()["paused"] is False
    [stats] = run_hailq("stats", "claims", "--json", url=reader_url).json()["queues"]
    assert (stats["dead"], stats["ready"]) == (1, 2)
    # The role really may not write: the same database refuses it a send.
    line = run_hailq("send", "--create", "claims", "4", url=reader_url).assert_clean_error(1)
    assert "permission denied" in line
    # ... and reads the desired_workers view an autoscaler polls (rule 25)
    schema = pg_url.rsplit("schema=", 1)[1]
    with psycopg.connect(reader_url.rsplit("?", 1)[0]) as conn:
        (wanted,) = conn.execute(sql.SQL(
            "SELECT desired_workers FROM {}.desired_workers WHERE queue = 'claims'").format(
            sql.Identifier(schema))).fetchone() or (None,)
    assert wanted == 1
