"""Rule 41 over HTTP: received messages carry their lease's fencing token, on SQLite and
on PostgreSQL, and a later lease of the same message carries a higher one."""

from __future__ import annotations

import httpx

import hailq


def test_rule_41_received_messages_carry_a_growing_fencing_token(
        admin: httpx.Client, broker: hailq.Broker) -> None:
    assert admin.put("/api/queues/jobs", json={}).status_code == 200
    admin.post("/api/queues/jobs/messages", json={"body": {"claim": 8320}})
    [first] = admin.post("/api/queues/jobs/receive", json={}).json()["messages"]
    r = admin.post("/api/queues/jobs/nack", json={"receipt": first["receipt"], "delay": 0})
    assert r.status_code == 200, r.text

    [second] = admin.post("/api/queues/jobs/receive", json={}).json()["messages"]

    assert second["id"] == first["id"] and second["attempt"] == 2
    assert isinstance(first["fencing_token"], int) and first["fencing_token"] >= 1
    assert second["fencing_token"] > first["fencing_token"]
    # The same numbers a Python consumer of the same database gets.
    admin.post("/api/queues/jobs/messages", json={"body": "next"})
    [mine] = broker.get_queue("jobs").receive()
    assert mine.fencing_token > second["fencing_token"]
