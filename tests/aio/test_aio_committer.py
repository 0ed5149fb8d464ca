"""Producers that share commits through ``hailq.aio`` (issue 34 point 6), on both
backends: concurrent coroutines' single sends share transactions, each returns once
its own message is durable, a dedup id still dedups, and a failure reaches exactly
the callers it concerns."""

from __future__ import annotations

import asyncio

import hailq
import hailq.aio
from hailq.committer import committer_for

COROUTINES = 100


def test_concurrent_coroutines_share_commits_and_each_send_is_durable(url: str) -> None:
    reader = hailq.connect(url)  # another broker: sees only what was committed

    async def main() -> tuple[list[list[str]], int]:
        async with hailq.aio.connect(url) as broker:
            q = await broker.queue("claims")

            async def sender(i: int) -> list[str]:
                ids = []
                for n in range(5):
                    sent = await q.send({"c": i, "n": n})
                    assert reader.queue("claims").get_message(sent) is not None
                    ids.append(sent)
                return ids

            sent = await asyncio.gather(*(sender(i) for i in range(COROUTINES)))
            return sent, committer_for(broker.sync.backend).groups

    sent, groups = asyncio.run(main())
    ids = [i for mine in sent for i in mine]
    assert len(set(ids)) == COROUTINES * 5
    assert groups > 0  # some commits were shared
    q = reader.queue("claims")
    got = []
    while batch := q.receive(max_messages=100):
        q.ack_many(batch)
        got.extend(batch)
    assert sorted(m.id for m in got) == sorted(ids)
    for i in range(COROUTINES):  # each coroutine's messages in its own order
        assert [m.body["n"] for m in got if m.body["c"] == i] == list(range(5))
    reader.close()


def test_a_dedup_id_still_dedups_across_coroutines(url: str) -> None:
    async def main() -> tuple[list[str], int]:
        async with hailq.aio.connect(url) as broker:
            q = await broker.queue("claims")
            ids = await asyncio.gather(*(q.send({"c": i}, dedup_id="claim-8311")
                                         for i in range(COROUTINES)))
            await asyncio.gather(*(q.send({"c": i}) for i in range(20)))
            return ids, (await q.stats()).sent

    ids, sent = asyncio.run(main())
    assert len(set(ids)) == 1 and sent == 21


def test_a_failed_send_reaches_only_its_own_caller(url: str) -> None:
    async def main() -> None:
        async with hailq.aio.connect(url) as broker:
            claims, doomed = await broker.queue("claims"), await broker.queue("doomed")
            await broker.delete_queue("doomed")
            sends = [claims.send({"c": i}) for i in range(30)]
            sends.insert(15, doomed.send({"lost": True}))
            done = await asyncio.gather(*sends, return_exceptions=True)
            assert isinstance(done[15], hailq.QueueNotFound)
            assert all(isinstance(d, str) for i, d in enumerate(done) if i != 15)
            assert (await claims.stats()).ready == 30

    asyncio.run(main())


def test_a_cancelled_sender_leaves_the_others_sent(url: str) -> None:
    async def main() -> None:
        async with hailq.aio.connect(url) as broker:
            q = await broker.queue("claims")
            tasks = [asyncio.ensure_future(q.send({"c": i})) for i in range(40)]
            await asyncio.sleep(0)
            tasks[20].cancel()
            done = await asyncio.gather(*tasks, return_exceptions=True)
            kept = [d for i, d in enumerate(done) if i != 20]
            assert all(isinstance(d, str) for d in kept)
            ready = (await q.stats()).ready
            # The cancelled one was sent only if its group had begun: 39 or 40.
            assert ready in (39, 40)
            if ready == 39:
                assert isinstance(done[20], asyncio.CancelledError)

    asyncio.run(main())
