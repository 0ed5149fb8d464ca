"""A worker's ``async def`` handlers get ``hailq.aio.AsyncMessage`` (rule 37), on both
backends: they await the message's calls, and what they settle stays settled."""

from __future__ import annotations

import threading

import hailq
import hailq.aio
from hailq.runtime import App, Worker
from waiting import wait_for


def test_rule_37_async_handlers_get_the_async_message_type(broker: hailq.Broker) -> None:
    app = App()
    seen: list[tuple[object, float]] = []

    @app.handler("claims", lease=30)
    async def check(message: hailq.aio.AsyncMessage) -> None:
        assert isinstance(message, hailq.aio.AsyncMessage)
        before = message.lease_until
        await message.extend(600)  # awaited through the worker's async broker
        seen.append((message.body, message.lease_until - before))
        if message.body == "dead":
            await message.dead_letter("settled by the handler")

    claims = broker.queue("claims")
    claims.send_many(["a", "b", "dead"])
    worker = Worker(broker, app, concurrency=2, poll=0.2)
    thread = threading.Thread(target=worker.run, kwargs={"handle_signals": False})
    thread.start()
    try:
        wait_for(lambda: len(seen) == 3, what="three messages")
        wait_for(lambda: claims.stats().acked == 2, what="two acks")
    finally:
        worker.stop()
        thread.join(20)
    assert not thread.is_alive()
    assert sorted(str(body) for body, _ in seen) == ["a", "b", "dead"]
    assert all(moved > 400 for _, moved in seen)  # each lease moved by the extend
    stats = claims.stats()
    assert (stats.acked, stats.dead, stats.in_flight) == (2, 1, 0)  # not acked after
    [dead] = claims.dead_letters()
    assert dead.last_error == "settled by the handler"
