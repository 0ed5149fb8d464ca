"""Producers that share commits at the seam (``hailq/committer.py`` over each driver):
one shared group made of several callers' sends, more rows than one insert statement
takes (SQLite stores groups without ordering keys in statements of at most 64 rows),
messages with and without a delay, a dedup id or an ordering key; on SQLite and on
PostgreSQL, each through the sync driver and through ``hailq.aio``'s. Each caller gets
its own ids, or its own error, and the rows are those its sends make one by one."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import Future

import pytest

import hailq
from hailq.backends.base import (
    Backend,
    DeleteParams,
    NewMessage,
    PeekParams,
    QueueRef,
    SendParams,
)
from hailq.backends.sqlite.inserts import ROWS_AT_MOST
from hailq.committer import Committer

from .conftest import claim, message, save

DELAY = 60.0


def _gated(backend: Backend) -> tuple[Committer, threading.Event, threading.Event]:
    """A committer whose first send waits for the gate, so that every send submitted
    meanwhile makes one group; and an event set once that first send waits."""
    gate, waiting = threading.Event(), threading.Event()

    def send(messages: Sequence[NewMessage]) -> list[str]:
        if not waiting.is_set():
            waiting.set()
            assert gate.wait(30)
        return backend.message_send(SendParams(messages))

    return Committer(send), gate, waiting


def _batch(keyed: bool) -> list[NewMessage]:
    """More than one statement's rows: every third delayed, every fifth with a dedup id
    (the tenth repeats the fifth's, the dedup within the batch), and with ``keyed``
    every seventh with an ordering key."""
    batch = []
    for i in range(ROWS_AT_MOST + 6):
        dedup = "a-5" if i == 10 else f"a-{i}" if i % 5 == 0 else None
        batch.append(message("q", {"a": i}, delay=DELAY if i % 3 == 0 else 0.0,
                             dedup_id=dedup, ordering_key="k" if keyed and i % 7 == 0
                             else None))
    return batch


@pytest.mark.parametrize("case", ["plain", "keyed", "doomed"])
def test_a_shared_group_of_many_rows_tells_each_caller_and_stores_each_row(
        backend: Backend, case: str) -> None:
    save(backend, "q")
    save(backend, "doomed")
    committer, gate, waiting = _gated(backend)
    first = message("q", "first")
    futures: dict[str, Future[list[str]]] = {"first": committer.submit([first])}
    assert waiting.wait(30)
    sends = {"batch": _batch(keyed=case == "keyed"),
             "delayed": [message("q", "delayed", delay=DELAY / 2, dedup_id="b")],
             "dedup": [message("q", "dedup", dedup_id="shared")],
             "again": [message("q", "again", dedup_id="shared")],  # another caller's
             "plain": [message("q", {"p": n}) for n in range(ROWS_AT_MOST // 2)]}
    if case == "doomed":  # a queue deleted meanwhile: its caller's error, only its
        backend.queue_delete(DeleteParams("doomed"))
        sends["lost"] = [message("doomed", "lost")]
    for name, messages in sends.items():
        futures[name] = committer.submit(messages)
    gate.set()

    stored = [first, *sends["batch"][:10], *sends["batch"][11:], *sends["delayed"],
              *sends["dedup"], *sends["plain"]]
    expected = {"first": [first.id], "delayed": [sends["delayed"][0].id],
                "dedup": [sends["dedup"][0].id], "again": [sends["dedup"][0].id],
                "batch": [m.id for m in sends["batch"]],
                "plain": [m.id for m in sends["plain"]]}
    expected["batch"][10] = expected["batch"][5]  # its dedup id's first message
    for name, future in futures.items():
        if name == "lost":
            with pytest.raises(hailq.QueueNotFound):
                future.result(60)
        else:
            assert future.result(60) == expected[name], name
    assert committer.groups == (0 if case == "doomed" else 1)  # else each went alone

    peeked = {p.id: p for p in backend.message_peek(PeekParams("q", limit=1000))}
    assert sorted(peeked) == sorted(m.id for m in stored)
    seen_keys: set[str] = set()
    for m in stored:
        p = peeked[m.id]
        assert (p.body, p.ordering_key, p.priority) == (
            hailq.codec.decode_body(m.body, m.body_kind), m.ordering_key, 0)
        assert p.available_at == pytest.approx(p.enqueued_at + m.delay, abs=0.01)
        if m.ordering_key is not None and m.ordering_key in seen_keys:
            assert p.state == "blocked", m  # behind the key's first message
        else:
            assert p.state == ("scheduled" if m.delay else "ready"), m
        if m.ordering_key is not None:
            seen_keys.add(m.ordering_key)
    assert backend.queue_stats(QueueRef("q")).sent == len(stored)  # the exact counter
    ready = [m.id for m in stored if not m.delay and m.ordering_key is None]
    got = [r.id for r in claim(backend, "q", 1000)]
    assert [i for i in got if i in set(ready)] == ready  # in send order
