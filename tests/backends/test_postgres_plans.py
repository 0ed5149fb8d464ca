"""The claim does not scan the backlog on PostgreSQL, also once the table was analyzed,
and it is not planned anew on every call.

Statements run prepared, and after five calls PostgreSQL keeps a statement's generic
plan if it costs no more than the plans it made for each call's values. With statistics
from ANALYZE (autovacuum runs it on every production server):

- the claim's update once joined its picked rows to a scan of every message: 4.9 ms a
  claim at 20,000 waiting against 0.9, growing with the backlog. The claim statements
  must plan by the primary key whatever the statistics say;
- a generic plan read ``LIMIT $n`` as a tenth of the table (and the acks' arrays as ten
  rows), cost more than a plan for the call's values, and was never used: every claim
  was planned anew, half of its time on the server. The LIMIT is written into the
  statement and the arrays are hidden from the planner alike in both kinds of plan.
"""

from __future__ import annotations

import re

import psycopg
import pytest

import hailq

CLAIMS = ("message_claim", "message_ack_claim")


def _generic_plan(conn: psycopg.Connection[tuple[object, ...]], text: str) -> str:
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    statement = re.sub(r"%\((\w+)\)s", number, text).replace("%%", "%")
    conn.execute(f"PREPARE claim_plan AS {statement}")
    try:
        conn.execute("SET plan_cache_mode = force_generic_plan")
        args = ", ".join("NULL" for _ in names)
        rows = conn.execute(f"EXPLAIN EXECUTE claim_plan({args})").fetchall()
        return "\n".join(str(r[0]) for r in rows)
    finally:
        conn.execute("DEALLOCATE claim_plan")


@pytest.mark.parametrize("name", CLAIMS)
def test_rule_16_an_analyzed_backlog_is_claimed_by_key_not_scanned(pg_url: str,
                                                                   name: str) -> None:
    with hailq.connect(pg_url) as broker:
        queue = broker.queue("claims")
        for _ in range(5):
            queue.send_many([{"claim": i} for i in range(1000)])
        dialect = broker.backend.dialect  # type: ignore[attr-defined]
        schema = dialect.schema
        text = dialect._q[name].replace("{limit}", "3")
        with psycopg.connect(pg_url.split("?")[0], autocommit=True) as conn:
            conn.execute(f'ANALYZE "{schema}".messages')
            plan = _generic_plan(conn, text)
        assert "Seq Scan on messages" not in plan, plan
        assert "Index Scan using messages_pkey" in plan, plan
        # And it still claims, oldest first, after the statistics changed.
        first = queue.receive(max_messages=3)
        assert [m.body["claim"] for m in first] == [0, 1, 2]
        _, more = queue.ack_and_receive(first, 2)
        assert [m.body["claim"] for m in more] == [3, 4]


def _plans(dialect: object, names: tuple[str, ...]) -> dict[str, list[int]]:
    """Generic and custom plans so far of statements ``names``, over the fast pool's
    connections (matched by their text up to the first parameter)."""
    heads = {name: dialect._q[name].split("%(")[0] for name in names}  # type: ignore[attr-defined]
    plans = {name: [0, 0] for name in names}
    pool = dialect._fast  # type: ignore[attr-defined]
    conns = [pool.getconn() for _ in range(pool.get_stats()["pool_size"])]
    try:
        for conn in conns:
            for generic, custom, text in conn.execute(
                    "SELECT generic_plans, custom_plans, statement FROM pg_prepared_statements"):
                for name, head in heads.items():
                    if text.startswith(head):
                        plans[name][0] += generic
                        plans[name][1] += custom
    finally:
        for conn in conns:
            pool.putconn(conn)
    return plans


def _analyzed(pg_url: str, broker: hailq.Broker, keyed: bool = False) -> hailq.Queue:
    queue = broker.queue("claims")
    for _ in range(5):
        queue.send_many([hailq.Envelope({"claim": i}, ordering_key=f"k{i % 300}" if keyed
                                        else None) for i in range(1000)])
    schema = broker.backend.dialect.schema  # type: ignore[attr-defined]
    with psycopg.connect(pg_url.split("?")[0], autocommit=True) as conn:
        conn.execute(f'ANALYZE "{schema}".messages')
    return queue


def _kept(plans: dict[str, list[int]]) -> None:
    for name, (generic, custom) in plans.items():
        # psycopg prepares a statement on its sixth run; PostgreSQL then makes five plans
        # for the values to compare with, and keeps the generic one.
        assert generic >= 5 and custom <= 10, (name, generic, custom)


def test_claims_of_an_analyzed_backlog_keep_one_plan(pg_url: str) -> None:
    with hailq.connect(pg_url) as broker:
        queue = _analyzed(pg_url, broker)
        for _ in range(20):
            queue.ack_many(queue.receive(1))
        got = queue.receive(2)
        for _ in range(20):
            _, got = queue.ack_and_receive(got, 2)
        _kept(_plans(broker.backend.dialect, CLAIMS))  # type: ignore[attr-defined]


def test_small_batches_of_an_analyzed_backlog_keep_one_plan(pg_url: str) -> None:
    with hailq.connect(pg_url) as broker:
        queue = _analyzed(pg_url, broker)
        for _ in range(20):
            got = queue.receive(3)
            queue.extend_many(got, 30)
            queue.ack_many(got)
        _kept(_plans(broker.backend.dialect,  # type: ignore[attr-defined]
                     ("message_ack_plain", "message_extend")))


def test_batches_of_keyed_acks_of_an_analyzed_backlog_keep_one_plan(pg_url: str) -> None:
    with hailq.connect(pg_url) as broker:
        queue = _analyzed(pg_url, broker, keyed=True)
        for _ in range(20):
            queue.ack_many(queue.receive(3))
        _kept(_plans(broker.backend.dialect,  # type: ignore[attr-defined]
                     ("message_ack", "keys_release")))
