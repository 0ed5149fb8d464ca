"""examples/mariadb_results: an asyncio consumer writes each result to MariaDB through
the inbox; a redelivered message (its ack lost) leaves exactly one result row. hailq's
queue on both backends, the results in a MariaDB database of the test's own."""

from __future__ import annotations

import asyncio
from typing import Any

import hailq
import hailq.aio
from stacks.conftest import MARIADB, Place


def test_a_redelivery_leaves_exactly_one_result_row(broker: hailq.Broker,
                                                     mysql_place: Place) -> None:
    from mariadb_results.consumer import consume, create_tables, handle
    from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine

    checks = broker.queue("checks", lease=0.3)
    checks.send_many([{"claim": 8311}, {"claim": 8312}])
    engine = create_async_engine(
        f"mysql+aiomysql://{MARIADB['user']}@{MARIADB['host']}:{MARIADB['port']}/"
        f"{mysql_place.mysql_db}")
    sessions = async_sessionmaker(engine)

    async def main() -> list[Any]:
        await create_tables(engine)
        aio = await hailq.aio.beside(broker)
        queue = await aio.queue("checks")
        [first] = await queue.receive()
        assert await handle(first, sessions)  # stored; its ack is lost: no ack
        # The lease ends; the consumer gets it again (attempt 2) and the other one.
        handled = await consume(queue, sessions, until_idle=True)
        await aio.close()
        async with engine.connect() as conn:
            rows = (await conn.exec_driver_sql(
                "SELECT claim, verdict FROM results ORDER BY claim")).fetchall()
        await engine.dispose()
        return [handled, [tuple(r) for r in rows]]

    handled, rows = asyncio.run(main())
    assert handled == 1  # only the other message wrote a row; the redelivery found its id
    assert rows == [(8311, "hail damage, roof"), (8312, "no damage found")]
    stats = checks.stats()
    assert stats.ready == stats.in_flight == 0 and stats.acked == 2 and stats.redelivered == 1


