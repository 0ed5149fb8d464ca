"""Rule 29 on a running server, every rule tried and refused, on SQLite and PostgreSQL:
tokens and roles (nothing changes in the database when refused), GET never mutates,
foreign Host and Origin, the cookie's CSRF check, 413 before parsing, no password
anywhere."""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

import hailq
from hailq.serve.app import document

from .conftest import ADMIN, CLIENT, READ, Server, Start


def _snapshot(broker: hailq.Broker) -> dict[str, Any]:
    """What the database holds, as far as any route could change it."""
    queues = {}
    for q in broker.queues():
        s = q.stats()
        queues[q.name] = {
            "stats": {k: v for k, v in vars(s).items() if k != "oldest_ready_age"},
            "settings": q.settings, "overrides": q.overrides,
            "live": [(m.id, m.state, m.attempt) for m in q.peek(1000)],
            "dead": [m.id for m in q.dead_letters()]}
    return {"queues": queues, "schedules": [(s.name, s.paused) for s in broker.schedules()],
            "topics": {t.name: [(s.queue, s.filter) for s in t.subscriptions()]
                       for t in broker.topics()}}


@pytest.fixture
def filled(server: Server, broker: hailq.Broker) -> Iterator[dict[str, str]]:
    """A queue with ready, leased and dead messages, a topic with a subscription."""
    q = broker.queue("jobs", max_attempts=1)
    ids = q.send_many(["a", "b", "c", "d"])
    [leased] = q.receive()
    [dying] = q.receive()
    dying.nack(error="boom")
    t = broker.topic("orders")
    t.subscribe("billing")
    broker.schedule(every=3600, queue="jobs", body="tick", name="tick")
    yield {"queue": "jobs", "id": ids[3], "dead": dying.id, "receipt": leased.receipt}


def _mutations(f: dict[str, str]) -> list[tuple[str, str, Any]]:
    """Every changing operation, with a body that would succeed for an admin."""
    q, mid = f["queue"], f["id"]
    return [
        ("PUT", "/api/queues/other", {}),
        ("PATCH", f"/api/queues/{q}", {"lease": 99}),
        ("DELETE", f"/api/queues/{q}?force=true", None),
        ("POST", f"/api/queues/{q}/pause", None),
        ("POST", f"/api/queues/{q}/resume", None),
        ("POST", f"/api/queues/{q}/purge", None),
        ("POST", f"/api/queues/{q}/messages", {"body": "sneaky"}),
        ("POST", f"/api/queues/{q}/receive", {"max_messages": 10}),
        ("POST", f"/api/queues/{q}/ack", {"receipts": [f["receipt"]]}),
        ("POST", f"/api/queues/{q}/nack", {"receipt": f["receipt"]}),
        ("POST", f"/api/queues/{q}/extend", {"receipt": f["receipt"], "seconds": 600}),
        ("DELETE", f"/api/queues/{q}/messages/{mid}", None),
        ("POST", f"/api/queues/{q}/messages/{mid}/cancel", None),
        ("POST", f"/api/queues/{q}/dead/redrive", {}),
        ("POST", f"/api/queues/{q}/dead/delete", {}),
        ("PUT", "/api/topics/news", None),
        ("DELETE", "/api/topics/orders?force=true", None),
        ("POST", "/api/topics/orders/subscriptions", {"subscription": "more"}),
        ("DELETE", "/api/topics/orders/subscriptions/billing", None),
        ("POST", "/api/topics/orders/publish", {"body": "sneaky"}),
    ]


CLIENT_MAY = {"/messages", "/receive", "/ack", "/nack", "/extend", "/publish"}


def _client_may(method: str, path: str) -> bool:
    return method == "POST" and any(path.endswith(end) for end in CLIENT_MAY)


def _send(c: httpx.Client, method: str, path: str, body: Any) -> httpx.Response:
    return c.request(method, path, json=body) if body is not None else c.request(method, path)


def test_rule_29_no_token_or_a_wrong_one_is_401_and_nothing_changes(
        server: Server, broker: hailq.Broker, filled: dict[str, str]) -> None:
    before = _snapshot(broker)
    for token in (None, "wrong-token", ADMIN + "x", READ[:-1]):
        c = server.client(token)
        for method, path, body in _mutations(filled):
            r = _send(c, method, path, body)
            assert r.status_code == 401, (token, method, path, r.text)
            assert r.json()["error"]["code"] == "unauthorized"
        for path in ("/api/queues", "/metrics", "/openapi.json", "/api/queues/jobs/dead", "/"):
            assert c.get(path).status_code == 401, path
    assert _snapshot(broker) == before


def test_rule_29_read_role_may_look_but_change_nothing(
        server: Server, broker: hailq.Broker, filled: dict[str, str]) -> None:
    before = _snapshot(broker)
    c = server.client(READ)
    for method, path, body in _mutations(filled):
        r = _send(c, method, path, body)
        assert r.status_code == 403, (method, path, r.text)
        assert r.json()["error"]["code"] == "forbidden"
    assert _snapshot(broker) == before
    assert c.get("/api/queues").status_code == 200
    assert c.get("/api/queues/jobs/dead").json()["count"] == 1


def test_rule_29_client_role_moves_messages_but_never_purges_deletes_or_configures(
        server: Server, broker: hailq.Broker, filled: dict[str, str]) -> None:
    c = server.client(CLIENT)
    refused = [m for m in _mutations(filled) if not _client_may(m[0], m[1])]
    assert len(refused) >= 12
    before = _snapshot(broker)
    for method, path, body in refused:
        r = _send(c, method, path, body)
        assert r.status_code == 403, (method, path, r.text)
    assert _snapshot(broker) == before
    # What a producer or consumer in another language needs works.
    assert c.post("/api/queues/jobs/messages", json={"body": "ok"}).status_code == 200
    [m] = c.post("/api/queues/jobs/receive", json={}).json()["messages"]
    assert c.post("/api/queues/jobs/extend",
                  json={"receipt": m["receipt"], "seconds": 60}).status_code == 200
    assert c.post("/api/queues/jobs/ack", json={"receipts": [m["receipt"]]}).json()[
        "results"][0]["acked"] is True
    assert c.post("/api/topics/orders/publish", json={"body": 1}).status_code == 200
    assert broker.get_queue("billing").stats().ready == 1
    # ... and nothing more: it never looks at other messages, dead letters or figures.
    for path in ("/api/queues", "/api/queues/jobs", "/api/queues/jobs/messages",
                 "/api/queues/jobs/dead", "/api/workers", "/metrics", "/",
                 "/queues/jobs"):
        assert c.get(path).status_code == 403, path
    assert c.get("/openapi.json").status_code == 200  # the API's description is for all


def test_rule_29_get_never_mutates(server: Server, broker: hailq.Broker,
                                   filled: dict[str, str]) -> None:
    """Every GET of the OpenAPI document, as admin: the database is unchanged after; and
    a GET on a changing route is 405, not the change."""
    c = server.client(ADMIN)
    before = _snapshot(broker)
    values = {"queue": "jobs", "topic": "orders", "subscription": "billing",
              "message_id": filled["id"]}
    gets = [p for p, ops in document()["paths"].items() if "get" in ops]
    assert len(gets) >= 12
    for path in gets:
        r = c.get(path.format(**values))
        assert r.status_code == 200, (path, r.text)
    for _, path, _ in _mutations(filled):
        r = c.get(path.partition("?")[0])
        assert r.status_code in (200, 404, 405), (path, r.status_code)
    assert _snapshot(broker) == before


def test_rule_29_foreign_host_is_refused(server: Server, broker: hailq.Broker) -> None:
    """DNS rebinding: a page of evil.example resolving to 127.0.0.1 sends Host:
    evil.example; the server answers only for its own names."""
    broker.queue("jobs")
    c = server.client(ADMIN)
    for host in ("evil.example", "evil.example:80", "127.0.0.2", "localhost.evil.example"):
        r = c.post("/api/queues/jobs/messages", json={"body": 1}, headers={"Host": host})
        assert r.status_code == 403, host
        assert r.json()["error"]["code"] == "foreign_host"
        assert c.get("/api/queues", headers={"Host": host}).status_code == 403
    assert broker.get_queue("jobs").stats().sent == 0
    port = server.base.rsplit(":", 1)[1]
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", "localhost"):
        assert c.get("/api/queues", headers={"Host": host}).status_code == 200, host


def test_rule_29_allow_host_names_more_hosts(start: Start) -> None:
    server = start(allow_hosts=("queue.internal",), host="0.0.0.0")
    c = server.client(ADMIN)
    assert c.get("/api/queues", headers={"Host": "queue.internal:8642"}).status_code == 200
    assert c.get("/api/queues", headers={"Host": "other.internal"}).status_code == 403
    # The wildcard address it was bound to is no name to answer for.
    assert c.get("/api/queues", headers={"Host": "0.0.0.0:8642"}).status_code == 403


def test_rule_29_login_link_sets_an_httponly_strict_cookie(server: Server) -> None:
    c = server.client(None)
    r = c.get("/login", params={"token": ADMIN})
    assert r.status_code == 303 and r.headers["location"] == "/"
    cookie = r.headers["set-cookie"]
    assert cookie.startswith(f"hailq_token={ADMIN}")
    lowered = cookie.lower()
    assert "httponly" in lowered and "samesite=strict" in lowered and "path=/" in lowered
    assert c.get("/api/queues").status_code == 200  # the cookie now authenticates
    bad = server.client(None).get("/login", params={"token": "guess"})
    assert bad.status_code == 401 and "set-cookie" not in bad.headers


def test_rule_29_cookie_change_needs_this_servers_origin(server: Server,
                                                         broker: hailq.Broker) -> None:
    """CSRF: another site's form or fetch carries no Origin of ours; the cookie alone
    never changes anything."""
    broker.queue("jobs")
    c = server.client(None, cookies={"hailq_token": ADMIN})
    for headers in ({}, {"Origin": "http://evil.example"}, {"Origin": "null"},
                    {"Referer": "http://evil.example/page"},
                    {"Origin": "http://127.0.0.1:1"}):
        r = c.post("/api/queues/jobs/pause", headers=headers)
        assert r.status_code == 403, (headers, r.text)
        r = c.post("/api/queues/jobs/messages", json={"body": 1}, headers=headers)
        assert r.status_code == 403, headers
    assert broker.get_queue("jobs").stats().paused is False
    assert broker.get_queue("jobs").stats().sent == 0
    assert c.get("/api/queues").status_code == 200  # a look needs no Origin
    own = server.base
    r = c.post("/api/queues/jobs/pause", headers={"Origin": own})
    assert r.status_code == 200, r.text
    r = c.post("/api/queues/jobs/resume", headers={"Referer": own + "/queues/jobs"})
    assert r.status_code == 200, r.text
    # A script with its bearer token sends no Origin and needs none.
    assert server.client(ADMIN).post("/api/queues/jobs/pause").status_code == 200


def test_rule_29_foreign_origin_is_refused_even_with_a_token(server: Server,
                                                             broker: hailq.Broker) -> None:
    broker.queue("jobs")
    c = server.client(ADMIN)
    r = c.post("/api/queues/jobs/messages", json={"body": 1},
               headers={"Origin": "http://evil.example"})
    assert r.status_code == 403 and r.json()["error"]["code"] == "foreign_origin"
    assert broker.get_queue("jobs").stats().sent == 0


def _chunks(total: int, size: int = 64 * 1024) -> Iterator[bytes]:
    sent = 0
    while sent < total:
        yield b"x" * min(size, total - sent)
        sent += size


def test_rule_29_oversized_body_is_413_before_it_is_parsed(start: Start,
                                                          broker: hailq.Broker) -> None:
    server = start(max_body=64 * 1024)
    broker.queue("jobs", max_message_size=1024 * 1024)
    c = server.client(ADMIN)
    big = json.dumps({"body": "x" * 100_000})
    r = c.post("/api/queues/jobs/messages", content=big,
               headers={"Content-Type": "application/json"})
    assert r.status_code == 413 and r.json()["error"]["code"] == "too_large"
    # Not JSON at all: 413, not 400, so it was refused before anything parsed it.
    r = c.post("/api/queues/jobs/messages", content=b"{" * 200_000)
    assert r.status_code == 413
    # Streamed without Content-Length: counted as it arrives.
    r = c.post("/api/queues/jobs/messages", content=_chunks(300_000))
    assert r.status_code == 413, r.text
    assert "content-length" not in {k.lower() for k in r.request.headers}
    # A declared length past the cap: answered before a byte of the body was sent.
    host, port = server.base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as raw:
        raw.sendall(f"POST /api/queues/jobs/messages HTTP/1.1\r\nHost: {host}\r\n"
                    f"Authorization: Bearer {ADMIN}\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {10 * 1024 * 1024}\r\n\r\n".encode())
        assert raw.recv(4096).startswith(b"HTTP/1.1 413 ")
    assert broker.get_queue("jobs").stats().sent == 0
    ok = c.post("/api/queues/jobs/messages", json={"body": "x" * 1000})
    assert ok.status_code == 200


def test_rule_29_errors_are_json_without_a_traceback(server: Server,
                                                     broker: hailq.Broker) -> None:
    broker.queue("jobs")
    c = server.client(ADMIN)
    for method, path, body in [("POST", "/api/queues/jobs/messages", "not json"),
                               ("POST", "/api/queues/jobs/messages", [1, 2]),
                               ("POST", "/api/queues/jobs/ack", {"receipts": "x"}),
                               ("GET", "/api/queues/jobs/dead?older_than=soon", None),
                               ("GET", "/api/queues/jobs/messages?limit=-1", None),
                               ("DELETE", "/api/queues/jobs?force=maybe", None)]:
        content = body if isinstance(body, str) else json.dumps(body)
        r = c.request(method, path, content=content if body is not None else None)
        assert r.status_code == 400, (path, r.text)
        error = r.json()["error"]
        assert error["code"] and error["message"] and "Traceback" not in r.text


def test_rule_29_password_is_never_in_errors_logs_or_pages(
        start: Start, pg_url: str, caplog: pytest.LogCaptureFixture) -> None:
    """A database URL with a password: neither an outage's 503, nor the server's log,
    nor any page shows it."""
    from .conftest import Running, free_port

    secret = "s3cret-Passw0rd"
    caplog.set_level(logging.DEBUG)
    gone = hailq.connect(f"postgresql://postgres:{secret}@127.0.0.1:{free_port()}/test"
                         "?connect_timeout=2", migrate=False)
    from hailq.serve import Tokens, create_app

    running = Running(create_app(gone, tokens=Tokens((ADMIN,))))
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{running.port}",
                          headers={"Authorization": f"Bearer {ADMIN}"}, timeout=60) as c:
            for path in ("/api/queues", "/api/queues/jobs", "/metrics", "/api/workers"):
                r = c.get(path)
                assert r.status_code == 503, (path, r.text)
                assert secret not in r.text
                assert r.json()["error"]["code"] == "storage_unavailable"
            r = c.post("/api/queues/jobs/messages", json={"body": 1})
            assert r.status_code == 503 and secret not in r.text
    finally:
        running.stop()
        gone.close()
    assert secret not in caplog.text
    assert "storage" in caplog.text or "database" in caplog.text  # the outage was logged
    # A working database reached with a password (the test server trusts it).
    with_password = pg_url.replace("postgres@", f"postgres:{secret}@", 1)
    assert with_password != pg_url
    broker = hailq.connect(with_password)
    broker.queue("jobs").send({"note": "hello"})
    running = Running(create_app(broker, tokens=Tokens((ADMIN,))))
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{running.port}",
                          headers={"Authorization": f"Bearer {ADMIN}"}, timeout=60) as c:
            for path in ("/", "/api/queues", "/api/queues/jobs", "/metrics", "/openapi.json",
                         "/api/queues/jobs/messages", "/api/queues/nope", "/api/workers"):
                r = c.get(path)
                assert r.status_code in (200, 404), (path, r.status_code)
                assert secret not in r.text, path
    finally:
        running.stop()
        broker.close()
    assert secret not in caplog.text


def test_rule_29_openapi_document_lists_every_route_with_its_role(server: Server) -> None:
    doc = server.client(READ).get("/openapi.json").json()
    from hailq.serve.api import OPERATIONS

    for method, path, _, spec in OPERATIONS:
        operation = doc["paths"][path][method.lower()]
        assert operation["x-hailq-role"] == spec.role
        assert "401" in operation["responses"] and "403" in operation["responses"]
    assert doc["paths"]["/healthz"]["get"]["security"] == []
