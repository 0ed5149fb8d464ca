"""Rule 40 over HTTP: ``GET /api/history`` with each filter, the history page, and the
consumer an HTTP client's receive records."""

from __future__ import annotations

import httpx

import hailq

from .conftest import READ, Server


def fill(broker: hailq.Broker) -> dict[str, str]:
    q = broker.queue("claims", retain="24h")
    ids = {"a": q.send({"claim": 4711}, headers={"claim_id": "4711"}, dedup_id="c-4711"),
           "b": q.send("two", ordering_key="cust-9"),
           "c": q.send("three")}
    got = {m.id: m for m in q.receive(3)}
    got[ids["a"]].ack()
    got[ids["b"]].ack()
    got[ids["c"]].dead_letter("refused by the bank")
    return ids


def test_history_api_filters_and_the_page(server: Server, broker: hailq.Broker,
                                           admin: httpx.Client) -> None:
    ids = fill(broker)
    reader = server.client(READ)  # reading history is the read role's
    every = reader.get("/api/history").json()
    assert {m["id"] for m in every["messages"]} == set(ids.values())
    by = {m["id"]: m for m in every["messages"]}
    assert by[ids["a"]]["body"] == {"claim": 4711} and by[ids["a"]]["outcome"] == "acked"
    assert by[ids["c"]]["attempts"][-1]["error"] == "refused by the bank"
    for query, expected in (({"id": ids["b"]}, {ids["b"]}),
                            ({"dedup_id": "c-4711"}, {ids["a"]}),
                            ({"header": "claim_id=4711"}, {ids["a"]}),
                            ({"ordering_key": "cust-9"}, {ids["b"]}),
                            ({"outcome": "dead"}, {ids["c"]}),
                            ({"queue": "claims", "since": "1h"}, set(ids.values())),
                            ({"until": "1h"}, set())):
        found = reader.get("/api/history", params=query)
        assert found.status_code == 200, found.text
        assert {m["id"] for m in found.json()["messages"]} == expected, query
    for bad in ({"outcome": "gone"}, {"header": "novalue"}, {"since": "yesterday"},
                {"limit": "0"}, {"queue": "no such/queue"}):
        assert reader.get("/api/history", params=bad).status_code == 400, bad
    page = admin.get("/history", params={"header": "claim_id=4711"})
    assert page.status_code == 200
    assert ids["a"] in page.text and ids["b"] not in page.text
    assert admin.get("/history", params={"outcome": "bad"}).status_code == 400


def test_an_http_clients_receive_is_recorded_as_such(server: Server, broker: hailq.Broker,
                                                       admin: httpx.Client) -> None:
    q = broker.queue("over-http", retain="1h")
    sent = q.send("x")
    got = admin.post("/api/queues/over-http/receive", json={"max_messages": 1}).json()
    receipt = got["messages"][0]["receipt"]
    assert admin.post("/api/queues/over-http/ack",
                      json={"receipts": [receipt]}).status_code == 200
    found = q.finished(sent)
    assert found is not None and found.consumer == "HTTP client"
