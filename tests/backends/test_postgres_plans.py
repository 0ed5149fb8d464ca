"""The claim does not scan the backlog on PostgreSQL, also once the table was analyzed.

Statements run prepared, and after a few calls psycopg's server-side statements use a
generic plan, which reads ``LIMIT $n`` as a tenth of the table. With statistics from
ANALYZE (autovacuum runs it on every production server) the claim's update once joined
its picked rows to a scan of every message: 4.9 ms a claim at 20,000 waiting against
0.9, growing with the backlog. The claim statements must plan by the primary key
whatever the statistics say.
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
        schema, text = dialect.schema, dialect._q[name]
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
