"""The workers, topics, dead-letter and message pages are live (issue 33, point 5), in a
real headless Chromium (Debian's ``/usr/bin/chromium`` driven by Playwright), on each
backend: a value changes on the page without a reload, by the same refresh of the
page's ``data-live`` parts as the overview's and the queue page's."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import hailq
from hailq.internal import ops
from waiting import wait_for

from .conftest import ADMIN, CLIENT, Server

pytestmark = pytest.mark.slow

@pytest.fixture
def open_page(chromium: Any, server: Server) -> Iterator[Callable[[str], Any]]:
    """A page of the dashboard, logged in with the admin token, marked so that ``kept``
    tells whether it was reloaded since."""
    contexts: list[Any] = []

    def open_(path: str) -> Any:
        context = chromium.new_context(viewport={"width": 1400, "height": 900})
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(30_000)
        page.goto(f"{server.base}/login?token={ADMIN}")
        page.goto(server.base + path)
        page.evaluate("() => { window.__kept = true; }")
        return page

    yield open_
    for context in contexts:
        context.close()


def kept(page: Any) -> bool:
    return bool(page.evaluate("() => window.__kept === true"))


def text(page: Any, selector: str) -> str:
    found = page.locator(selector)
    return str(found.first.inner_text()).strip() if found.count() else ""


def worker(in_flight: int, *, id: str = "w-1") -> hailq.WorkerInfo:
    return hailq.WorkerInfo(id=id, host="img-01", pid=101, queues=["jobs"], concurrency=4,
                            in_flight=in_flight, started_at=time.time(), last_seen=0.0,
                            state="running")


def test_the_workers_page_is_live(open_page: Callable[[str], Any],
                                  broker: hailq.Broker) -> None:
    broker.queue("jobs")
    ops(broker).save_worker(worker(0))
    page = open_page("/workers")
    in_flight = "#workers tbody tr td:nth-child(5)"
    assert text(page, in_flight) == "0"
    assert "live" in text(page, "#live")
    ops(broker).save_worker(worker(3))
    wait_for(lambda: text(page, in_flight) == "3", 30, "the in-flight count to refresh")
    ops(broker).save_worker(worker(1, id="w-2"))
    wait_for(lambda: page.locator("#workers tbody tr").count() == 2, 30,
             "the second worker to appear")
    assert kept(page)


def test_the_topics_page_is_live(open_page: Callable[[str], Any],
                                 broker: hailq.Broker) -> None:
    topic = broker.topic("signups")
    topic.subscribe("welcome-mail")
    topic.publish({"user": 1})
    page = open_page("/topics")
    ready = '#topics td[data-count="ready"]'
    assert text(page, ready) == "1"
    topic.publish_many([{"user": 2}, {"user": 3}])
    wait_for(lambda: text(page, ready) == "3", 30, "the subscription's ready count to refresh")
    broker.topic("orders")
    wait_for(lambda: "orders" in text(page, "#topics"), 30, "the new topic to appear")
    assert kept(page)


def test_the_dead_letter_page_is_live(open_page: Callable[[str], Any],
                                      broker: hailq.Broker) -> None:
    q = broker.queue("mail", max_attempts=1)

    def kill(n: int) -> None:
        q.send_many([{"n": i} for i in range(n)])
        for m in q.receive(n):
            m.nack(error="Traceback (most recent call last):\n  File \"app.py\", line 3, "
                         "in work\nTimeoutError: smtp")

    kill(1)
    page = open_page("/queues/mail/dead")
    assert text(page, "#match-count") == "1"
    example = "#groups details.example"
    assert page.locator(example).get_attribute("open") is not None  # opened by the server
    kill(2)
    wait_for(lambda: text(page, "#match-count") == "3", 30, "the match count to refresh")
    assert text(page, "#groups tr.group td.num") == "3"
    assert page.locator("#dead tbody tr").count() == 3
    # Closed by the operator, the example stays closed as the page keeps refreshing.
    page.click(f"{example} summary")
    assert page.locator(example).get_attribute("open") is None
    kill(1)
    wait_for(lambda: text(page, "#match-count") == "4", 30, "the match count to refresh")
    assert page.locator(example).get_attribute("open") is None
    assert kept(page)


def test_the_message_page_is_live(open_page: Callable[[str], Any], server: Server,
                                  broker: hailq.Broker) -> None:
    q = broker.queue("orders", max_attempts=3)
    message_id = q.send({"order": 8311})
    page = open_page(f"/queues/orders/message?id={message_id}")
    assert text(page, "h1 .state") == "ready"
    client = server.client(CLIENT)
    [m] = client.post("/api/queues/orders/receive", json={"lease": 60}).json()["messages"]
    wait_for(lambda: text(page, "h1 .state") != "ready", 30, "the state to refresh")
    assert text(page, "h1 .state") in ("leased", "in_flight", "in flight")
    assert client.post("/api/queues/orders/nack", json={
        "receipt": m["receipt"], "error": "ValueError: bad total", "delay": 600,
    }).status_code == 200
    wait_for(lambda: "ValueError: bad total" in text(page, ".errors-list"), 30,
             "the new error to show")
    assert kept(page)
