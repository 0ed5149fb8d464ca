"""The dashboard's topics page shows each subscription's backlog (ready, in flight,
dead), so an operator sees which subscriber falls behind; both backends."""

from __future__ import annotations

import re

import hailq

from .conftest import ADMIN, Server


def _counts(html: str, queue: str) -> list[str]:
    row = html.split(f'href="/queues/{queue}">{queue}</a></td>')[1].split("</tr>")[0]
    return re.findall(r'data-count="\w+">([^<]*)</td>', row)


def test_each_subscription_shows_its_backlog(server: Server, broker: hailq.Broker) -> None:
    topic = broker.topic("claims-events")
    topic.subscribe("audit", max_attempts=1)
    topic.subscribe("billing")
    for n in range(5):
        topic.publish({"claim": n})
    [held] = broker.get_queue("audit").receive(lease=60)
    [dead] = broker.get_queue("audit").receive(lease=60)
    dead.nack(error="boom", delay=0)
    assert held.id != dead.id
    html = server.client(ADMIN).get("/topics").text
    assert _counts(html, "audit") == ["3", "1", "1"]  # ready, in flight, dead
    assert _counts(html, "billing") == ["5", "0", "0"]
