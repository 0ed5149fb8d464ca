"""Rule 31 through ``hailq.aio`` on PostgreSQL: a call to a server that stopped
answering ends within the URL's timeout, bounded by the dialect's own watchdog (not by
cancelling the task), and a send whose outcome is unknown says it may be stored."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

import hailq
import hailq.aio
from backends.pgstall import StallingRelay

TIMEOUT = 2  # seconds: the URL's timeout option
SLACK = 1.5  # seconds past it that a failing call may take to come back


@pytest.fixture
def relay(pg_url: str) -> Iterator[StallingRelay]:
    hailq.connect(pg_url).close()  # the schema, made without the relay
    proxy = StallingRelay(pg_url)
    yield proxy
    proxy.close()


def test_rule_31_an_async_send_to_a_stalled_server_fails_in_time_and_may_be_stored(
        relay: StallingRelay, pg_url: str) -> None:
    async def scenario() -> None:
        async with hailq.aio.connect(f"{relay.url}&timeout={TIMEOUT}") as broker:
            q = await broker.queue("claims")
            await q.send({"claim": 0})  # the pool holds a working connection
            relay.stall()
            began = time.monotonic()
            with pytest.raises(hailq.OutcomeUnknown) as caught:
                await q.send({"claim": 1}, dedup_id="claim-1")
            assert time.monotonic() - began < TIMEOUT + SLACK
            assert f"no answer within {TIMEOUT} s" in str(caught.value)
            assert "may have been stored" in str(caught.value)
            began = time.monotonic()
            with pytest.raises(hailq.StorageError):
                await q.receive()
            assert time.monotonic() - began < TIMEOUT + SLACK
            relay.resume()
            await q.send({"claim": 1}, dedup_id="claim-1")  # stored once (rule 4)
            got = await q.receive(max_messages=10)
            assert sorted(m.body["claim"] for m in got) == [0, 1]

    asyncio.run(scenario())
