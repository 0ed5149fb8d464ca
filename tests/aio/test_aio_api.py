"""``hailq.aio`` on both backends (rule 37): the sync API's calls awaited, waits that
hold no thread and keep their deadlines, a broker bound to its event loop."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

import hailq
import hailq.aio
from aio_bridge import LoopThread


def run(url: str, scenario: Callable[[hailq.aio.AsyncBroker], Awaitable[Any]]) -> Any:
    """``scenario`` with a fresh async broker on ``url``, in an event loop of its own."""
    async def main() -> Any:
        async with hailq.aio.connect(url) as broker:
            return await scenario(broker)

    return asyncio.run(main())


def test_rule_37_send_receive_ack_nack_extend(url: str) -> None:
    async def scenario(broker: hailq.aio.AsyncBroker) -> None:
        q = await broker.queue("claims", lease=30)
        first = await q.send({"claim": 1}, priority=5)
        await q.send_many([{"claim": 2}, {"claim": 3}])
        got = await q.receive(max_messages=10)
        assert [m.body["claim"] for m in got] == [1, 2, 3] and got[0].id == first
        assert isinstance(got[0], hailq.aio.AsyncMessage) and got[0].attempt == 1
        before = got[0].lease_until
        await got[0].extend(300)
        assert got[0].lease_until > before + 200
        await got[0].ack()
        await got[1].nack(delay=0, error="try again")
        await got[2].dead_letter("bad claim")
        [again] = await q.receive()
        assert again.body == {"claim": 2} and again.attempt == 2
        await again.ack()
        with pytest.raises(hailq.LeaseLost):
            await again.ack()
        stats = await q.stats()
        assert (stats.ready, stats.in_flight, stats.dead, stats.acked) == (0, 0, 1, 2)
        [dead] = await q.dead_letters()
        assert dead.errors[-1].error == "bad claim"
        assert await q.redrive() == 1
        [back] = await q.receive()
        assert back.body == {"claim": 3}
        with pytest.raises(hailq.InvalidArgument):  # nothing acked: checked first
            await q.ack_many([back, "not-a-receipt"])
        assert await q.ack_many([back]) == [False]
        assert await q.ack_many([back.receipt]) == [None]  # lease lost: gone
    run(url, scenario)


def test_dedup_priorities_and_ordering_keys(url: str) -> None:
    async def scenario(broker: hailq.aio.AsyncBroker) -> None:
        q = await broker.queue("jobs")
        a = await q.send("a", dedup_id="d1")
        assert await q.send("again", dedup_id="d1") == a
        await q.send("low", priority=1)
        await q.send("high", priority=9)
        await q.send("k1", ordering_key="k")
        await q.send("k2", ordering_key="k")
        got = await q.receive(max_messages=10)
        assert [m.body for m in got] == ["high", "low", "a", "k1"]  # k2 waits for k1
        for m in got:
            await m.ack()
        [k2] = await q.receive()
        assert k2.body == "k2"
        await k2.ack()
    run(url, scenario)


def test_bad_input_is_refused_and_writes_nothing(url: str) -> None:
    async def scenario(broker: hailq.aio.AsyncBroker) -> None:
        q = await broker.queue("jobs")
        with pytest.raises(hailq.InvalidArgument):
            await q.send("x", priority="high")  # type: ignore[arg-type]
        with pytest.raises(hailq.InvalidArgument):
            await q.receive(wait=-1)
        with pytest.raises(hailq.InvalidArgument):
            await broker.queue("jobs", lease=-3)
        assert (await q.stats()).ready == 0
    run(url, scenario)


def test_rule_37_a_waiting_receive_is_woken_by_a_send_and_keeps_its_deadline(url: str) -> None:
    async def scenario(broker: hailq.aio.AsyncBroker) -> None:
        q = await broker.queue("jobs")
        began = time.monotonic()
        assert await q.receive(wait=0.4) == []
        assert 0.35 < time.monotonic() - began < 3.0  # rule 31: bounded, not early

        async def later() -> None:
            await asyncio.sleep(0.2)
            await q.send("late")

        sender = asyncio.ensure_future(later())
        began = time.monotonic()
        [got] = await q.receive(wait=10)
        assert got.body == "late" and time.monotonic() - began < 5
        await sender
    run(url, scenario)


def test_rule_37_waiting_receives_hold_no_thread(url: str) -> None:
    async def scenario(broker: hailq.aio.AsyncBroker) -> None:
        q = await broker.queue("jobs")
        await q.send("warm")
        [m] = await q.receive()
        await m.ack()
        before = threading.active_count()
        waiting = [asyncio.ensure_future(q.receive(wait=30)) for _ in range(200)]
        await asyncio.sleep(0.5)
        assert not any(w.done() for w in waiting)
        assert threading.active_count() <= before + 4  # no thread per waiting receive
        await q.send_many(list(range(200)))
        got = await asyncio.wait_for(asyncio.gather(*waiting), 30)
        assert sorted(m.body for [m] in got) == list(range(200))
    run(url, scenario)


def test_topics_publish_to_every_subscription(url: str) -> None:
    async def scenario(broker: hailq.aio.AsyncBroker) -> None:
        topic = await broker.topic("claims")
        audit = await topic.subscribe("audit")
        paid = await topic.subscribe("paid", filter={"kind": "paid"})
        copies = await topic.publish({"n": 1}, headers={"kind": "paid"})
        assert set(copies) == {"audit", "paid"}
        await topic.publish({"n": 2}, headers={"kind": "open"})
        assert [m.body for m in await audit.receive(10)] == [{"n": 1}, {"n": 2}]
        assert [m.body for m in await paid.receive(10)] == [{"n": 1}]
        assert [s.queue for s in await topic.subscriptions()] == ["audit", "paid"]
        assert [t.name for t in await broker.topics()] == ["claims"]
    run(url, scenario)


def test_operators_calls(url: str) -> None:
    async def scenario(broker: hailq.aio.AsyncBroker) -> None:
        q = await broker.queue("jobs", lease=30)
        await q.send_many(["a", "b"])
        assert [p.body for p in await q.peek()] == ["a", "b"]
        await q.pause()
        assert await q.receive() == [] and (await q.stats()).paused
        await q.resume()
        settings = await q.configure(lease=5)
        assert settings.lease == 5
        assert (await broker.get_queue("jobs")).settings.lease == 5
        assert await q.purge() == 2
        info = await broker.schedule(every=60, queue="jobs", body="tick", name="ticker")
        assert info.name == "ticker" and [s.name for s in await broker.schedules()] == ["ticker"]
        await broker.pause_schedule("ticker")
        await broker.delete_schedule("ticker")
        assert await broker.schedules() == []
        info = await broker.schedule(every=60, queue="jobs", body="tick", name="ticker")
        with pytest.warns(DeprecationWarning, match="delete_schedule"):
            await broker.remove_schedule("ticker")  # the old name, for one release
        assert await broker.schedules() == []
        assert await broker.delete_queue("jobs") == 0
        assert isinstance(await broker.now(), float)
    run(url, scenario)


def test_rule_37_a_broker_belongs_to_its_event_loop(url: str) -> None:
    owner = LoopThread()
    try:
        broker = owner.run(_connect(url))
        queue = owner.run(broker.queue("jobs"))

        async def elsewhere() -> None:
            with pytest.raises(hailq.aio.WrongEventLoop, match="event loop"):
                await queue.send("x")

        asyncio.run(elsewhere())
        assert owner.run(queue.stats()).ready == 0  # nothing was sent
        owner.run(broker.close())
    finally:
        owner.stop()


async def _connect(url: str) -> hailq.aio.AsyncBroker:
    return await hailq.aio.connect(url)


def test_a_sync_call_on_the_loop_of_an_async_postgres_broker_is_refused(pg_url: str) -> None:
    async def scenario(broker: hailq.aio.AsyncBroker) -> None:
        with pytest.raises(hailq.aio.SyncCallOnLoop, match="await"):
            broker.sync.queue("jobs")  # the sync face, called without await
    run(pg_url, scenario)


def test_rule_37_a_hundred_coroutines_send_at_once_each_message_stored_once(url: str) -> None:
    async def scenario(broker: hailq.aio.AsyncBroker) -> None:
        q = await broker.queue("claims")
        ids = await asyncio.wait_for(asyncio.gather(
            *[q.send({"claim": i}, dedup_id=f"c{i % 50}") for i in range(100)]), 60)
        assert len(set(ids)) == 50  # a dedup id still dedups between coroutines
        assert (await q.stats()).ready == 50
    run(url, scenario)
