"""Rule 40 over HTTP: ``POST /api/queues/{queue}/messages/{id}/cancel`` (admin only), on
SQLite and on PostgreSQL; a refused ack or nack of a cancelled message."""

from __future__ import annotations

import httpx

import hailq

from .conftest import CLIENT, READ, Server


def _error(response: httpx.Response, status: int, code: str | None = None) -> str:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert code is None or error["code"] == code, error
    return str(error["message"])


def test_rule_40_cancel_a_waiting_and_a_running_message_over_http(
        admin: httpx.Client, broker: hailq.Broker) -> None:
    jobs = broker.queue("jobs", lease=30)
    waiting = jobs.send("later", delay=3600)
    running = jobs.send("now")
    [leased] = admin.post("/api/queues/jobs/receive", json={}).json()["messages"]
    assert leased["id"] == running
    assert admin.post(f"/api/queues/jobs/messages/{waiting}/cancel").json() == {
        "id": waiting, "cancelled": "waiting"}
    assert admin.post(f"/api/queues/jobs/messages/{running}/cancel").json() == {
        "id": running, "cancelled": "running"}
    shown = admin.get(f"/api/queues/jobs/messages/{running}").json()
    assert shown["state"] == "cancelled" and shown["last_error"] == "cancelled"
    message = _error(admin.post("/api/queues/jobs/nack", json={"receipt": leased["receipt"]}),
                     409, "message_cancelled")
    assert "cancelled" in message
    _error(admin.get(f"/api/queues/jobs/messages/{running}"), 404)  # let go: it stopped
    _error(admin.post(f"/api/queues/jobs/messages/{running}/cancel"), 404, "not_found")
    _error(admin.post("/api/queues/jobs/messages/not-an-id/cancel"), 400)
    _error(admin.post(f"/api/queues/nowhere/messages/{running}/cancel"), 404)
    assert jobs.stats().nacked == 0


def test_rule_40_only_an_admin_may_cancel(server: Server, broker: hailq.Broker) -> None:
    jobs = broker.queue("jobs")
    kept = jobs.send("work")
    for token in (READ, CLIENT):
        r = server.client(token).post(f"/api/queues/jobs/messages/{kept}/cancel")
        assert r.status_code == 403, r.text
    assert jobs.get_message(kept) is not None
