"""``AsyncMessage.transaction()`` on both backends (rules 22 and 37): an effect written
in the broker's database commits together with the ack, as ``Message.transaction``."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import hailq
import hailq.aio
from conformance.helpers import RawDatabase


@pytest.fixture
def raw(backend_name: str, url: str) -> RawDatabase:
    return RawDatabase(backend_name, url)


@pytest.fixture
def effects(raw: RawDatabase) -> str:
    hailq.connect(raw.url).close()  # the schema exists before the table goes in it
    return raw.create_table("effects", "message_id TEXT PRIMARY KEY, amount INTEGER")


async def record(raw: RawDatabase, conn: Any, table: str, m: hailq.aio.AsyncMessage) -> None:
    await conn.execute(raw.sql(f"INSERT INTO {table} VALUES (?, ?)"),
                       (m.id, m.body["amount"]))


async def one_claim(broker: hailq.aio.AsyncBroker,
                    ) -> tuple[hailq.aio.AsyncQueue, hailq.aio.AsyncMessage]:
    """A billing queue with one message sent and received."""
    q = await broker.queue("billing", lease=30)
    await q.send({"amount": 99})
    [m] = await q.receive()
    return q, m


def test_the_effect_commits_together_with_the_ack(url: str, raw: RawDatabase,
                                                  effects: str) -> None:
    async def main() -> None:
        async with hailq.aio.connect(url) as broker:
            q, m = await one_claim(broker)
            ticks = 0

            async def ticking() -> None:  # the loop is free while the block runs
                nonlocal ticks
                while True:
                    ticks += 1
                    await asyncio.sleep(0.001)

            ticker = asyncio.ensure_future(ticking())
            async with m.transaction() as conn:
                await record(raw, conn, effects, m)
                cur = await conn.execute(raw.sql(f"SELECT amount FROM {effects}"))
                assert await cur.fetchall() == [(99,)]  # its own write, not yet committed
                assert raw.count(effects) == 0
                await asyncio.sleep(0.05)
            ticker.cancel()
            assert ticks > 5 and m.settled
            stats = await q.stats()
            assert (stats.acked, stats.in_flight) == (1, 0)
            with pytest.raises(hailq.LeaseLost):
                await m.ack()

    asyncio.run(main())
    assert raw.execute(f"SELECT amount FROM {effects}") == [(99,)]


def test_an_error_in_the_block_rolls_back_effect_and_ack(url: str, raw: RawDatabase,
                                                         effects: str) -> None:
    async def main() -> None:
        async with hailq.aio.connect(url) as broker:
            q, m = await one_claim(broker)
            with pytest.raises(ZeroDivisionError):
                async with m.transaction() as conn:
                    await record(raw, conn, effects, m)
                    _ = 1 / 0
            assert raw.count(effects) == 0 and not m.settled
            stats = await q.stats()
            assert (stats.acked, stats.in_flight) == (0, 1)
            await m.ack()  # the lease was never given up
            assert (await q.stats()).acked == 1

    asyncio.run(main())


def test_a_lost_lease_commits_nothing_and_the_current_holder_commits(
        url: str, raw: RawDatabase, effects: str) -> None:
    async def main() -> None:
        async with hailq.aio.connect(url) as broker:
            q = await broker.queue("billing", lease=30)
            await q.send({"amount": 99})
            [stale] = await q.receive()
            await stale.nack(delay=0)  # given back: its lease is gone
            [current] = await q.receive()
            with pytest.raises(hailq.LeaseLost):
                async with stale.transaction() as conn:
                    await record(raw, conn, effects, stale)
            assert raw.count(effects) == 0
            async with current.transaction() as conn:
                await record(raw, conn, effects, current)
            assert (await q.stats()).acked == 1

    asyncio.run(main())
    assert raw.count(effects) == 1


def test_a_failing_statement_in_the_block_rolls_back(url: str, raw: RawDatabase,
                                                     effects: str) -> None:
    """The block sees the driver's own error, and leaving the block with it rolls back."""
    async def main() -> None:
        async with hailq.aio.connect(url) as broker:
            q, m = await one_claim(broker)
            with pytest.raises(Exception, match=r"(?i)no such table|does not exist"):
                async with m.transaction() as conn:
                    await conn.execute("INSERT INTO no_such_table VALUES (1)")
            assert (await q.stats()).in_flight == 1
            async with m.transaction() as conn:  # the lease is still held: again
                await record(raw, conn, effects, m)

    asyncio.run(main())
    assert raw.count(effects) == 1


def test_the_queue_commits_an_effect_with_the_ack_by_receipt(url: str, raw: RawDatabase,
                                                             effects: str) -> None:
    async def main() -> None:
        async with hailq.aio.connect(url) as broker:
            q, m = await one_claim(broker)
            assert m.lease.message_id == m.id  # the lease, as the sync message has it
            receipt = m.receipt  # a consumer that kept only the receipt
            with pytest.raises(RuntimeError):
                async with q.ack_transaction(receipt) as conn:
                    await record(raw, conn, effects, m)
                    raise RuntimeError("the effect failed")
            assert raw.count(effects) == 0 and (await q.stats()).in_flight == 1
            async with q.ack_transaction(receipt) as conn:
                await record(raw, conn, effects, m)
            stats = await q.stats()
            assert (stats.acked, stats.in_flight) == (1, 0)
            with pytest.raises(hailq.LeaseLost):
                async with q.ack_transaction(receipt):
                    pass

    asyncio.run(main())
    assert raw.execute(f"SELECT amount FROM {effects}") == [(99,)]
