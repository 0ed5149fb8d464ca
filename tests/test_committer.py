"""Producers that share commits (hailq/committer.py), on both backends: overlapping sends
of many threads share transactions, each returns once its own message is durable, a
dedup id still dedups, and a failure reaches exactly the callers it concerns."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import hailq
from hailq.backends.base import NewMessage, SendParams
from hailq.checks import Envelope
from hailq.committer import Committer, committer_for

THREADS = 16


def _together(n: int, work: Callable[[int], list[str]]) -> list[list[str]]:
    """``work(i)`` on ``n`` threads that start at once."""
    start = threading.Barrier(n)

    def run(i: int) -> list[str]:
        start.wait()
        return work(i)

    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(run, range(n)))


def test_overlapping_sends_share_commits_and_each_is_durable_when_it_returns(
        broker: hailq.Broker, url: str) -> None:
    q = broker.queue("claims")
    reader = hailq.connect(url)  # another broker: sees only what was committed

    def send(i: int) -> list[str]:
        ids = []
        for n in range(20):
            sent = q.send({"thread": i, "n": n})
            assert reader.queue("claims").get_message(sent) is not None  # durable already
            ids.append(sent)
        return ids

    ids = [i for sent in _together(THREADS, send) for i in sent]
    assert len(set(ids)) == THREADS * 20
    assert committer_for(broker.backend).groups > 0  # some commits were shared
    got = []
    while batch := q.receive(max_messages=100):
        q.ack_many(batch)
        got.extend(batch)
    assert sorted(m.id for m in got) == sorted(ids)
    for i in range(THREADS):  # each thread's own messages in its order
        mine = [m.body["n"] for m in got if m.body["thread"] == i]
        assert mine == list(range(20))
    reader.close()


def test_a_dedup_id_still_dedups_across_threads(broker: hailq.Broker) -> None:
    q = broker.queue("claims")
    ids = _together(THREADS, lambda i: [q.send({"t": i}, dedup_id="claim-8311"),
                                        *q.send_many(["x", Envelope("y", dedup_id="d-2")])])
    assert len({sent[0] for sent in ids}) == 1 and len({sent[2] for sent in ids}) == 1
    assert q.stats().sent == 2 + THREADS  # one per dedup id, and every "x"


def _gated(broker: hailq.Broker) -> tuple[Committer, threading.Event]:
    """A committer whose first send waits for the gate: what is submitted meanwhile
    becomes one group."""
    gate, first = threading.Event(), threading.Event()

    def send(messages: list[NewMessage]) -> list[str]:
        if not first.is_set():
            first.set()
            gate.wait(10)
        return broker.backend.message_send(SendParams(messages))

    return Committer(send), gate


def _messages(q: hailq.Queue, *bodies: str) -> list[NewMessage]:
    return [q._new(Envelope(b)) for b in bodies]


def test_a_failed_group_reaches_only_the_callers_whose_messages_failed(
        broker: hailq.Broker) -> None:
    claims, doomed = broker.queue("claims"), broker.queue("doomed")
    committer, gate = _gated(broker)
    first = committer.submit(_messages(claims, "first"))
    doomed_messages = _messages(doomed, "d")
    broker.delete_queue("doomed")
    ok_1 = committer.submit(_messages(claims, "a", "b"))
    lost = committer.submit(doomed_messages)
    ok_2 = committer.submit(_messages(claims, "c"))
    gate.set()
    assert len(first.result(10)) == 1 and len(ok_1.result(10)) == 2 and ok_2.result(10)
    with pytest.raises(hailq.QueueNotFound):
        lost.result(10)
    assert [m.body for m in claims.receive(max_messages=10)] == ["first", "a", "b", "c"]


def test_a_database_failure_reaches_every_caller_of_its_group(tmp_path: Path) -> None:
    path = tmp_path / "busy.db"
    broker = hailq.connect(f"sqlite:///{path}?busy_timeout=0.3")
    q = broker.queue("claims")
    committer, gate = _gated(broker)
    first = committer.submit(_messages(q, "first"))
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # the write lock, held past busy_timeout
    group = [committer.submit(_messages(q, b)) for b in ("a", "b")]
    gate.set()
    for future in (first, *group):
        with pytest.raises(hailq.StorageError, match="busy"):
            future.result(10)
    holder.execute("ROLLBACK")
    assert committer.submit(_messages(q, "after")).result(10)
    assert [m.body for m in q.receive(max_messages=10)] == ["after"]
    holder.close()
    broker.close()


def test_an_asyncio_caller_awaits_its_future(broker: hailq.Broker) -> None:
    q = broker.queue("claims")
    committer = committer_for(broker.backend)

    async def main() -> list[list[str]]:
        return await asyncio.gather(*(asyncio.wrap_future(committer.submit(
            _messages(q, f"m{i}"))) for i in range(10)))

    ids = [i for sent in asyncio.run(main()) for i in sent]
    assert sorted(m.id for m in q.receive(max_messages=20)) == sorted(ids)


def test_sends_waiting_behind_a_failed_commit_are_told_at_once_and_then_go_alone(
        broker: hailq.Broker) -> None:
    """Rule 31: none waits for a second failing commit past its deadline."""
    q = broker.queue("claims")
    calls: list[int] = []
    started, gate = threading.Event(), threading.Event()

    def send(messages: list[NewMessage]) -> list[str]:
        calls.append(len(messages))
        if len(calls) == 1:
            started.set()
            gate.wait(10)
            raise hailq.StorageError("the database is unreachable")
        return broker.backend.message_send(SendParams(messages))

    committer = Committer(send)
    first = committer.submit(_messages(q, "first"))
    assert started.wait(10)
    waiting = [committer.submit(_messages(q, b)) for b in ("a", "b")]
    gate.set()
    for future in (first, *waiting):
        with pytest.raises(hailq.StorageError, match="unreachable"):
            future.result(10)
    assert calls == [1]  # the waiting sends never reached the database: nothing stored
    assert not committer.healthy
    assert len(committer.send(_messages(q, "after"))) == 1  # alone, then shared again
    assert committer.healthy and q.stats().sent == 1
