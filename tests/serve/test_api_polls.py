"""Long polls over HTTP, on SQLite and PostgreSQL: a crowd of waiting polls never delays
a receive elsewhere, the polls of a queue share one waiter, each message goes to one
poll, a poll whose client left claims nothing, and a message claimed as its client
left is given back at once with the attempt counted (rules 6 and 13)."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import psycopg
import pytest

import hailq
from hailq.serve import Tokens, create_app
from hailq.serve.app import close_app
from hailq.serve.polls import LEFT, Polls
from waiting import wait_for

from .conftest import ADMIN, CLIENT, Running

POLLS = 80  # more than the 64 threads that once held every receive


@dataclass
class Served:
    base: str
    port: int
    polls: Polls
    running: Running

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.base, timeout=60,
                            headers={"Authorization": f"Bearer {CLIENT}"})

    def connections(self) -> int:
        return len(self.running.server.server_state.connections)


@pytest.fixture
def served(broker: hailq.Broker) -> Iterator[Served]:
    app = create_app(broker, tokens=Tokens((ADMIN,), (), (CLIENT,)))
    running = Running(app)
    yield Served(f"http://127.0.0.1:{running.port}", running.port, app.state.polls, running)
    running.stop()
    close_app(app)


def _until(what: Callable[[], bool], timeout: float = 30) -> None:
    wait_for(what, timeout, what="not reached in time", step=0.01)


def _waiting(polls: Polls, queue: str) -> int:
    waiter = polls._waiters.get(queue)
    return 0 if waiter is None else waiter.polls


class Crowd:
    """``n`` long polls of ``queue`` from one asyncio client, in a thread of their own."""

    def __init__(self, base: str, queue: str, n: int, wait: float) -> None:
        self.results: list[dict[str, Any]] = []
        self.thread = threading.Thread(target=asyncio.run, args=(self._run(base, queue, n,
                                                                           wait),))
        self.thread.start()

    async def _run(self, base: str, queue: str, n: int, wait: float) -> None:
        limits = httpx.Limits(max_connections=n + 10)
        async with httpx.AsyncClient(base_url=base, timeout=wait + 30, limits=limits,
                                     headers={"Authorization": f"Bearer {CLIENT}"}) as c:
            async def one() -> None:
                r = await c.post(f"/api/queues/{queue}/receive", json={"wait": wait})
                assert r.status_code == 200, r.text
                self.results.append(r.json())

            await asyncio.gather(*(one() for _ in range(n)))


def test_waiting_polls_never_delay_a_receive_on_another_queue(
        served: Served, broker: hailq.Broker) -> None:
    broker.queue("waiting")
    busy = broker.queue("busy")
    busy.send_many([f"b{i}" for i in range(20)])
    crowd = Crowd(served.base, "waiting", POLLS, wait=40)
    _until(lambda: served.polls._waiters["waiting"].sleeping() == POLLS
           if "waiting" in served.polls._waiters else False)
    assert served.polls.waiters() == 1  # one waiter task for the queue, not one per poll
    started = time.monotonic()
    with served.client() as c:
        for _ in range(20):
            r = c.post("/api/queues/busy/receive", json={"wait": 0})
            assert r.status_code == 200 and len(r.json()["messages"]) == 1
    # Answered while every poll still waits: long before their 40 s end.
    assert time.monotonic() - started < 30 and crowd.results == []
    assert _waiting(served.polls, "waiting") == POLLS
    # Each message sent now goes to exactly one of the polls (rule 7).
    ids = broker.get_queue("waiting").send_many([f"w{i}" for i in range(POLLS)])
    crowd.thread.join(60)
    assert not crowd.thread.is_alive()
    got = [m["id"] for r in crowd.results for m in r["messages"]]
    assert sorted(got) == sorted(ids)
    _until(lambda: served.polls.waiters() == 0)  # the waiter leaves with its last poll


class RawCrowd:
    """``n`` long polls of ``queue``, each on a connection of its own written by hand
    (an HTTP client's pool of a thousand connections costs more than what is tested),
    from one event loop in a thread of its own."""

    def __init__(self, port: int, queue: str, n: int, wait: float) -> None:
        self.answered: list[list[str]] = []
        self.thread = threading.Thread(target=asyncio.run, args=(self._run(port, queue, n,
                                                                           wait),))
        self.thread.start()

    async def _run(self, port: int, queue: str, n: int, wait: float) -> None:
        body = f'{{"wait": {wait}}}'

        async def one() -> None:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(f"POST /api/queues/{queue}/receive HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                         f"Authorization: Bearer {CLIENT}\r\nConnection: close\r\n"
                         f"Content-Type: application/json\r\nContent-Length: {len(body)}"
                         f"\r\n\r\n{body}".encode())
            head, _, answer = (await reader.read()).partition(b"\r\n\r\n")  # to EOF
            assert head.startswith(b"HTTP/1.1 200 "), head
            self.answered.append([m["id"] for m in json.loads(answer)["messages"]])
            writer.close()

        await asyncio.gather(*(one() for _ in range(n)))


def test_a_thousand_waiting_polls_hold_no_thread(served: Served, broker: hailq.Broker) -> None:
    waiting = broker.queue("waiting")
    before = threading.active_count()
    crowd = RawCrowd(served.port, "waiting", 1000, wait=60)
    _until(lambda: "waiting" in served.polls._waiters
           and served.polls._waiters["waiting"].sleeping() == 1000, timeout=120)
    # The crowd's own thread, the async driver's few (SQLite's executor, PostgreSQL's
    # watchdog): nothing that grows with the polls.
    assert threading.active_count() <= before + 6
    ids = waiting.send_many([f"m{i}" for i in range(1000)])
    crowd.thread.join(120)
    assert not crowd.thread.is_alive()
    assert sorted(i for got in crowd.answered for i in got) == sorted(ids)  # once each


def test_a_poll_wakes_for_a_delayed_message_and_ends_empty_after_wait(
        served: Served, broker: hailq.Broker) -> None:
    queue = broker.queue("jobs")
    queue.send("later", delay=1)
    with served.client() as c:
        r = c.post("/api/queues/jobs/receive", json={"wait": 30})
        assert [m["body"] for m in r.json()["messages"]] == ["later"]
        started = time.monotonic()
        r = c.post("/api/queues/jobs/receive", json={"wait": 0.5})
        assert r.json()["messages"] == [] and time.monotonic() - started >= 0.5


def _request(port: int, queue: str, wait: float) -> socket.socket:
    raw = socket.create_connection(("127.0.0.1", port), timeout=30)
    body = f'{{"wait": {wait}}}'
    raw.sendall(f"POST /api/queues/{queue}/receive HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                f"Authorization: Bearer {CLIENT}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n{body}".encode())
    return raw


def _give_up_after_a_second(served: Served) -> None:
    """An HTTP client whose read timeout is shorter than the wait it asked for."""
    with pytest.raises(httpx.ReadTimeout), httpx.Client(
            base_url=served.base, headers={"Authorization": f"Bearer {CLIENT}"},
            timeout=httpx.Timeout(10, read=1)) as c:
        c.post("/api/queues/jobs/receive", json={"wait": 50})


@pytest.mark.parametrize("how", ["socket closed", "client timeout"])
def test_a_poll_whose_client_left_claims_nothing(served: Served, broker: hailq.Broker,
                                                 how: str) -> None:
    queue = broker.queue("jobs", max_attempts=1)
    before = served.connections()
    if how == "socket closed":
        raw = _request(served.port, "jobs", 50)
        # Its first claim found nothing: it waits now (a message sent while that claim
        # was under way could be claimed, and then given back with its attempt counted).
        _until(lambda: _waiting(served.polls, "jobs") == 1
               and served.polls._waiters["jobs"].sleeping() == 1)
        raw.close()  # the client goes away while its poll waits
    else:
        _give_up_after_a_second(served)  # it waited a second, then went away
        # Its poll may have been woken as the client gave up (seen once in a loaded
        # make test): a poll whose claim is under way as its client leaves gives what it
        # got back, its delivery counted. Here the poll sees the departure first.
        _until(lambda: _waiting(served.polls, "jobs") == 0)
    _until(lambda: served.connections() == before)  # the server saw it leave
    queue.send("for someone who is there")
    # The poll leaves long before its 50 s wait ends, without the message.
    _until(lambda: _waiting(served.polls, "jobs") == 0, timeout=25)
    with served.client() as c:
        got = c.post("/api/queues/jobs/receive", json={"wait": 0}).json()["messages"]
    assert len(got) == 1, (queue.stats(), queue.dead_letters(), queue.peek())
    [m] = got
    assert m["attempt"] == 1  # the poll that lost its client never leased it
    assert queue.stats().dead == 0


@contextmanager
def _database_locked(url: str) -> Iterator[None]:
    """Every claim waits while this holds the messages table (or SQLite's write lock)."""
    if url.startswith("sqlite"):
        import sqlite3

        conn = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            conn.execute("ROLLBACK")
            conn.close()
        return
    base, _, schema = url.partition("?schema=")
    with psycopg.connect(base) as pg:
        pg.execute(f'LOCK TABLE "{schema}".messages IN ACCESS EXCLUSIVE MODE')
        yield
        pg.rollback()


@pytest.mark.parametrize("wait", [0, 20])
def test_a_message_claimed_as_its_client_left_is_given_back_at_once(
        served: Served, broker: hailq.Broker, url: str, wait: float) -> None:
    queue = broker.queue("jobs", max_attempts=2, lease=600)
    [sent] = queue.send_many(["gone"])
    limiter = served.polls.quick if wait == 0 else served.polls.claims
    before = served.connections()
    with _database_locked(url):
        raw = _request(served.port, "jobs", wait)
        _until(lambda: limiter.borrowed_tokens == 1)  # its claim waits on the lock
        raw.close()
        _until(lambda: served.connections() == before)  # the server saw it leave
    _until(lambda: limiter.borrowed_tokens == 0)
    found = queue.get_message(sent)
    assert found is not None and found.state == "ready", found  # not held for 600 s
    assert found.attempt == 1 and found.last_error == LEFT  # the delivery counts
    # Its last attempt given back too: no failure of the message's, so it is not dead.
    with _database_locked(url):
        raw = _request(served.port, "jobs", wait)
        _until(lambda: limiter.borrowed_tokens == 1)
        raw.close()
        _until(lambda: served.connections() == before)
    _until(lambda: limiter.borrowed_tokens == 0)
    _until(lambda: (m := queue.get_message(sent)) is not None and m.attempt == 2
           and m.state == "ready")
    assert queue.stats().dead == 0 and queue.get_message(sent).last_error == LEFT
    with served.client() as c:  # and someone who stays gets it
        got = c.post("/api/queues/jobs/receive", json={"wait": 0}).json()["messages"]
    assert [m["id"] for m in got] == [sent]
