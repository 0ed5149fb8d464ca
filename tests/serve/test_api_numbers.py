"""Every number and digit form a client can send gets 400 with a clear JSON error, never
500 or a dropped connection: integers of 400 digits, floats beyond a double (1e400),
huge finite floats, NaN and Infinity (which Python's JSON reader takes), and digits of
other scripts in the query (``?limit=²``). On SQLite and on PostgreSQL."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

import hailq

from .conftest import Server

HUGE = "9" * 400  # an integer of 400 digits, written into the JSON as it is
NUMBERS = [HUGE, "-" + HUGE, "1e400", "-1e400", "1e300", "NaN", "Infinity", "-Infinity"]


def _refused(response: httpx.Response) -> str:
    assert response.status_code == 400, (response.status_code, response.text[:300])
    error = response.json()["error"]
    assert set(error) == {"code", "message"} and error["code"] in (
        "invalid_argument", "invalid_json"), error
    assert HUGE not in error["message"]  # not echoed whole
    return str(error["message"])


def _raw(client: httpx.Client, method: str, path: str, body: str) -> httpx.Response:
    return client.request(method, path, content=body.encode(),
                          headers={"Content-Type": "application/json"})


@pytest.fixture
def ready(server: Server, broker: hailq.Broker) -> dict[str, Any]:
    admin = server.client()
    assert admin.put("/api/queues/jobs", json={}).status_code == 200
    assert admin.put("/api/topics/news").status_code == 200
    queue = broker.get_queue("jobs")
    queue.send("held")
    held = queue.receive(lease=60)[0]
    return {"admin": admin, "receipt": held.receipt}


def _bodies(n: str, receipt: str) -> list[tuple[str, str, str]]:
    """(method, path, body) with the number ``n`` in each field that takes a number."""
    q = "/api/queues/jobs"
    return [
        ("POST", f"{q}/messages", f'{{"body": 1, "delay": {n}}}'),
        ("POST", f"{q}/messages", f'{{"messages": [{{"body": 1, "priority": {n}}}]}}'),
        ("POST", f"{q}/receive", f'{{"wait": {n}}}'),
        ("POST", f"{q}/receive", f'{{"lease": {n}}}'),
        ("POST", f"{q}/receive", f'{{"max_messages": {n}}}'),
        ("POST", f"{q}/extend", f'{{"receipt": "{receipt}", "seconds": {n}}}'),
        ("POST", f"{q}/nack", f'{{"receipt": "{receipt}", "delay": {n}}}'),
        ("POST", f"{q}/dead/redrive", f'{{"older_than": {n}}}'),
        ("POST", f"{q}/dead/delete", f'{{"limit": {n}}}'),
        ("PUT", f"{q}", f'{{"lease": {n}}}'),
        ("PUT", f"{q}", f'{{"max_attempts": {n}}}'),
        ("PUT", f"{q}", f'{{"aging": {n}}}'),
        ("PUT", f"{q}", f'{{"dedup_window": {n}}}'),
        ("PUT", f"{q}", f'{{"max_message_size": {n}}}'),
        ("PUT", f"{q}", f'{{"max_in_flight": {n}}}'),
        ("PUT", f"{q}", f'{{"retry": {{"base": {n}}}}}'),
        ("PUT", f"{q}", f'{{"slo": {{"9": {n}}}}}'),
        ("PATCH", f"{q}", f'{{"lease": {n}}}'),
        ("POST", "/api/topics/news/subscriptions",
         f'{{"subscription": "s1", "settings": {{"lease": {n}}}}}'),
        ("POST", "/api/topics/news/publish", f'{{"body": 1, "delay": {n}}}'),
    ]


@pytest.mark.parametrize("n", NUMBERS)
def test_every_number_field_refuses_numbers_out_of_range_with_400(
        ready: dict[str, Any], broker: hailq.Broker, n: str) -> None:
    admin: httpx.Client = ready["admin"]
    for method, path, body in _bodies(n, ready["receipt"]):
        _refused(_raw(admin, method, path, body))
    queue = broker.get_queue("jobs")
    # Nothing was written: the settings are the defaults, the held message still held.
    assert queue.settings == hailq.QueueSettings()
    assert queue.stats().in_flight == 1 and queue.stats().ready == 0
    assert [t.name for t in broker.topics()] == ["news"] and "s1" not in broker.queues()
    assert admin.get("/healthz").status_code == 200  # the connection and server live on


def test_nan_and_infinity_are_no_json(ready: dict[str, Any]) -> None:
    message = _refused(_raw(ready["admin"], "POST", "/api/queues/jobs/messages",
                            '{"body": NaN}'))
    assert "NaN" in message
    message = _refused(_raw(ready["admin"], "POST", "/api/queues/jobs/messages",
                            '{"body": [1e400]}'))
    assert "too large" in message


@pytest.mark.parametrize("limit", ["²", "١٢", "𝟙", "1" * 5000, "-1", "+5", " 5", "5.0", "0x10"])
def test_query_limits_take_ascii_digits_only(ready: dict[str, Any], limit: str) -> None:
    admin: httpx.Client = ready["admin"]
    for path in ("/api/queues/jobs/messages", "/api/queues/jobs/dead"):
        message = _refused(admin.get(path, params={"limit": limit}))
        assert "limit must be an integer from 1 to 1000" in message
    page = admin.get("/queues/jobs", params={"limit": limit})  # the dashboard's too
    assert page.status_code == 400 and "limit must be a whole number" in page.text


@pytest.mark.parametrize("older_than", ["1e400", "nan", "inf", "-1", "١٢", "²", "1" * 5000,
                                        "1_000", "0x10"])
def test_query_seconds_take_ascii_decimals_only(ready: dict[str, Any], older_than: str) -> None:
    message = _refused(ready["admin"].get("/api/queues/jobs/dead",
                                          params={"older_than": older_than}))
    assert "older_than must be a number of seconds" in message


def test_numbers_in_range_still_work(ready: dict[str, Any], broker: hailq.Broker) -> None:
    admin: httpx.Client = ready["admin"]
    assert admin.get("/api/queues/jobs/messages", params={"limit": "7"}).status_code == 200
    assert admin.get("/api/queues/jobs/dead",
                     params={"older_than": "1.5", "limit": "1000"}).status_code == 200
    assert _raw(admin, "PUT", "/api/queues/jobs", '{"lease": 12.5, "max_attempts": 3.0}'
                ).status_code == 200
    assert broker.get_queue("jobs").settings.max_attempts == 3
    r = _raw(admin, "POST", "/api/queues/jobs/messages", '{"body": 12345678901234567890123}')
    assert r.status_code == 200  # a body is any JSON value, big integers too
