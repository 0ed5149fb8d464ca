"""Every operation of the HTTP API through a real HTTP client against a running server,
on SQLite and on PostgreSQL."""

from __future__ import annotations

import base64
import threading
import time
from typing import Any

import httpx
import pytest

import hailq
from hailq.internal import ops

from .conftest import CLIENT, Server


def _error(response: httpx.Response, status: int, code: str | None = None) -> str:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"code", "message"}
    assert code is None or error["code"] == code, error
    assert "Traceback" not in response.text
    return str(error["message"])


def _declare(admin: httpx.Client, name: str = "jobs", **settings: Any) -> dict[str, Any]:
    r = admin.put(f"/api/queues/{name}", json=settings)
    assert r.status_code == 200, r.text
    found: dict[str, Any] = r.json()
    return found


def test_healthz_needs_no_token(server: Server) -> None:
    r = server.client(None).get("/healthz")
    assert r.status_code == 200 and r.json() == {"ok": True}


def test_declare_show_and_list_queues(admin: httpx.Client, broker: hailq.Broker) -> None:
    shown = _declare(admin, "jobs", lease=12, max_attempts=3, slo={"9": 10})
    assert shown["name"] == "jobs" and shown["paused"] is False
    assert shown["settings"]["lease"] == 12 and shown["settings"]["max_attempts"] == 3
    assert shown["settings"]["slo"] == {"9": 10}
    assert broker.get_queue("jobs").settings.lease == 12  # it is in the database
    listed = admin.get("/api/queues").json()["queues"]
    assert [q["name"] for q in listed] == ["jobs"]
    figures = listed[0]["figures"]
    for name in ("ready", "delayed", "in_flight", "dead", "oldest_ready_age", "rates",
                 "breaches", "desired_workers"):
        assert name in figures
    one = admin.get("/api/queues/jobs").json()
    assert "priorities" in one and one["overrides"] == {}


def test_declare_refuses_bad_settings_and_writes_nothing(admin: httpx.Client,
                                                         broker: hailq.Broker) -> None:
    _error(admin.put("/api/queues/jobs", json={"lease": "soon"}), 400, "invalid_argument")
    _error(admin.put("/api/queues/jobs", json={"colour": "red"}), 400)
    _error(admin.put("/api/queues/bad name", json={}), 400)
    _error(admin.put("/api/queues/jobs", content=b"{not json"), 400, "invalid_json")
    assert broker.queues() == []


def test_send_one_and_receive_ack(admin: httpx.Client, broker: hailq.Broker) -> None:
    _declare(admin)
    r = admin.post("/api/queues/jobs/messages",
                   json={"body": {"order": 7}, "priority": 5, "headers": {"kind": "order"}})
    assert r.status_code == 200, r.text
    [message_id] = r.json()["ids"]
    got = admin.post("/api/queues/jobs/receive", json={"max_messages": 5}).json()["messages"]
    assert len(got) == 1
    m = got[0]
    assert m["id"] == message_id and m["body"] == {"order": 7} and m["priority"] == 5
    assert m["headers"] == {"kind": "order"} and m["attempt"] == 1
    acked = admin.post("/api/queues/jobs/ack", json={"receipts": [m["receipt"]]}).json()
    assert acked == {"results": [{"receipt": m["receipt"], "acked": True, "late": False}]}
    assert broker.get_queue("jobs").stats().acked == 1
    again = admin.post("/api/queues/jobs/ack", json={"receipts": [m["receipt"]]}).json()
    assert again["results"][0]["acked"] is False  # the lease is gone: nothing acked twice


def test_send_batch_with_options_and_bytes(admin: httpx.Client, broker: hailq.Broker) -> None:
    _declare(admin)
    raw = bytes(range(256))
    batch = {"messages": [
        {"body_base64": base64.b64encode(raw).decode(), "priority": 1},
        {"body": "later", "delay": 3600},
        {"body": "k1", "ordering_key": "cust-1", "dedup_id": "d-1"},
        {"body": "k1 again", "ordering_key": "cust-1", "dedup_id": "d-1"},
    ]}
    ids = admin.post("/api/queues/jobs/messages", json=batch).json()["ids"]
    assert len(ids) == 4 and ids[2] == ids[3]  # the dedup id named the first message
    stats = broker.get_queue("jobs").stats()
    assert stats.scheduled == 1 and stats.ready == 2
    got = admin.post("/api/queues/jobs/receive", json={"max_messages": 10}).json()["messages"]
    by_id = {m["id"]: m for m in got}
    assert base64.b64decode(by_id[ids[0]]["body_base64"]) == raw
    assert "body" not in by_id[ids[0]]
    assert by_id[ids[2]]["ordering_key"] == "cust-1"


def test_send_to_an_unknown_queue_is_404_not_a_new_queue(admin: httpx.Client,
                                                         broker: hailq.Broker) -> None:
    _error(admin.post("/api/queues/clams/messages", json={"body": 1}), 404, "not_found")
    assert broker.queues() == []


def test_send_refuses_bad_messages_atomically(admin: httpx.Client, broker: hailq.Broker) -> None:
    _declare(admin)
    for bad in ({"body": 1, "body_base64": "AA=="}, {}, {"body_base64": "!!"},
                {"body": 1, "priority": 12}, {"body": 1, "colour": "red"},
                {"messages": [{"body": 1}, {"body": 2, "priority": -1}]}):
        _error(admin.post("/api/queues/jobs/messages", json=bad), 400)
    assert broker.get_queue("jobs").stats().sent == 0


def test_message_larger_than_the_queue_allows_is_413(admin: httpx.Client) -> None:
    _declare(admin, max_message_size=100)
    _error(admin.post("/api/queues/jobs/messages", json={"body": "x" * 500}), 413,
           "message_too_large")


def test_nack_extend_and_lost_lease(admin: httpx.Client, broker: hailq.Broker) -> None:
    _declare(admin, max_attempts=1)
    admin.post("/api/queues/jobs/messages", json={"body": "fail me"})
    [m] = admin.post("/api/queues/jobs/receive", json={"lease": 30}).json()["messages"]
    until = admin.post("/api/queues/jobs/extend",
                       json={"receipt": m["receipt"], "seconds": 120}).json()["lease_until"]
    assert until > m["lease_until"]
    r = admin.post("/api/queues/jobs/nack", json={"receipt": m["receipt"], "error": "boom"})
    assert r.status_code == 200, r.text
    assert broker.get_queue("jobs").stats().dead == 1  # its only attempt failed
    _error(admin.post("/api/queues/jobs/nack", json={"receipt": m["receipt"]}), 409,
           "lease_lost")
    _error(admin.post("/api/queues/jobs/extend", json={"receipt": m["receipt"], "seconds": 5}),
           409, "lease_lost")
    _error(admin.post("/api/queues/jobs/ack", json={"receipts": ["not-a-receipt"]}), 400)


def test_long_poll_wakes_when_a_message_is_sent(admin: httpx.Client, server: Server,
                                                broker: hailq.Broker) -> None:
    _declare(admin)
    result: dict[str, Any] = {}

    def poll() -> None:
        with server.client(CLIENT) as c:
            started = time.monotonic()
            got = c.post("/api/queues/jobs/receive", json={"wait": 50}).json()
            result["messages"] = got["messages"]
            result["took"] = time.monotonic() - started

    waiter = threading.Thread(target=poll)
    waiter.start()
    time.sleep(1.0)  # the poll is waiting now (or soon): the send must wake it
    assert "messages" not in result
    # The event loop is free while the poll waits: other requests answer meanwhile.
    assert admin.get("/healthz").status_code == 200
    broker.get_queue("jobs").send("wake up")
    waiter.join(45)
    assert not waiter.is_alive()
    assert [m["body"] for m in result["messages"]] == ["wake up"]
    assert result["took"] < 45  # woken by the send, long before its 50 s wait


def test_receive_wait_is_capped(admin: httpx.Client) -> None:
    _declare(admin)
    _error(admin.post("/api/queues/jobs/receive", json={"wait": 10_000}), 400)
    _error(admin.post("/api/queues/jobs/receive", json={"max_messages": 0}), 400)


def test_rule_32_peek_show_and_delete_one_message(admin: httpx.Client,
                                                  broker: hailq.Broker) -> None:
    _declare(admin)
    ids = admin.post("/api/queues/jobs/messages",
                     json={"messages": [{"body": "a"}, {"body": "b"}]}).json()["ids"]
    peeked = admin.get("/api/queues/jobs/messages", params={"limit": 1}).json()["messages"]
    assert [m["id"] for m in peeked] == ids[:1] and peeked[0]["state"] == "ready"
    shown = admin.get(f"/api/queues/jobs/messages/{ids[0]}").json()
    assert shown["state"] == "ready" and shown["body"] == "a" and shown["errors"] == []
    assert admin.delete(f"/api/queues/jobs/messages/{ids[0]}").json() == {"deleted": True}
    _error(admin.get(f"/api/queues/jobs/messages/{ids[0]}"), 404)
    _error(admin.delete(f"/api/queues/jobs/messages/{ids[0]}"), 404)
    _error(admin.get("/api/queues/jobs/messages/not-an-id"), 400)
    assert broker.get_queue("jobs").stats().ready == 1


def test_rule_32_shown_message_carries_the_error_of_each_attempt(admin: httpx.Client) -> None:
    _declare(admin, max_attempts=3)
    [mid] = admin.post("/api/queues/jobs/messages", json={"body": 1}).json()["ids"]
    for n in range(2):
        [m] = admin.post("/api/queues/jobs/receive", json={}).json()["messages"]
        admin.post("/api/queues/jobs/nack",
                   json={"receipt": m["receipt"], "delay": 0, "error": f"error {n}"})
    shown = admin.get(f"/api/queues/jobs/messages/{mid}").json()
    assert [e["error"] for e in shown["errors"]] == ["error 0", "error 1"]
    assert shown["last_error"] == "error 1"


def _kill(admin: httpx.Client, bodies: list[str], error: str) -> list[str]:
    ids: list[str] = admin.post("/api/queues/jobs/messages", json={
        "messages": [{"body": b} for b in bodies]}).json()["ids"]
    got = admin.post("/api/queues/jobs/receive",
                     json={"max_messages": len(bodies)}).json()["messages"]
    for m in got:
        admin.post("/api/queues/jobs/nack", json={"receipt": m["receipt"], "error": error})
    return ids


def test_rule_14_dead_letters_filters_redrive_and_delete_in_bulk(admin: httpx.Client,
                                                 broker: hailq.Broker) -> None:
    _declare(admin, max_attempts=1)
    timeouts = _kill(admin, ["t1", "t2", "t3"], "timeout talking to mail")
    crashes = _kill(admin, ["c1"], "crash in handler")
    dead = admin.get("/api/queues/jobs/dead").json()
    assert dead["count"] == 4 and dead["count_exact"] is True
    assert dead["messages"][0]["errors"][0]["error"] == "timeout talking to mail"
    filtered = admin.get("/api/queues/jobs/dead", params={"error": "timeout"}).json()
    assert sorted(m["id"] for m in filtered["messages"]) == sorted(timeouts)
    assert filtered["count"] == 3
    assert admin.get("/api/queues/jobs/dead", params={"limit": 1}).json()["count"] == 4
    # Redrive on the server everything the filter matches, capped by limit.
    r = admin.post("/api/queues/jobs/dead/redrive", json={"error": "timeout", "limit": 2})
    assert r.json() == {"redriven": 2}
    assert broker.get_queue("jobs").stats().dead == 2
    r = admin.post("/api/queues/jobs/dead/redrive", json={"ids": crashes})
    assert r.json() == {"redriven": 1}
    # Delete by filter: only dead letters go, never a live message named by id.
    live = broker.get_queue("jobs").peek(10)[0].id
    r = admin.post("/api/queues/jobs/dead/delete", json={"ids": [live]})
    assert r.json() == {"deleted": 0}
    r = admin.post("/api/queues/jobs/dead/delete", json={"error": "timeout"})
    assert r.json() == {"deleted": 1}
    assert broker.get_queue("jobs").stats().dead == 0
    assert broker.get_queue("jobs").get_message(live) is not None
    _error(admin.post("/api/queues/jobs/dead/delete", json={"ids": [live], "limit": 3}), 400)


def test_rule_32_pause_resume_configure_and_purge_over_http(admin: httpx.Client,
                                                            broker: hailq.Broker) -> None:
    _declare(admin, lease=30)
    admin.post("/api/queues/jobs/messages", json={"messages": [{"body": 1}, {"body": 2}]})
    assert admin.post("/api/queues/jobs/pause").json() == {"paused": True}
    assert broker.get_queue("jobs").stats().paused
    assert admin.post("/api/queues/jobs/receive", json={}).json()["messages"] == []
    assert admin.get("/api/queues/jobs").json()["paused"] is True
    # Sends are still accepted while paused.
    assert admin.post("/api/queues/jobs/messages", json={"body": 3}).status_code == 200
    assert admin.post("/api/queues/jobs/resume").json() == {"paused": False}
    assert len(admin.post("/api/queues/jobs/receive", json={}).json()["messages"]) == 1
    shown = admin.patch("/api/queues/jobs", json={"lease": 90}).json()
    assert shown["settings"]["lease"] == 90 and shown["overridden"] == ["lease"]
    assert broker.get_queue("jobs").overrides == {"lease": 90.0}
    _declare(admin, lease=30)  # a deploy's declaration does not undo the override
    assert broker.get_queue("jobs").settings.lease == 90
    assert admin.patch("/api/queues/jobs", json={"reset": True}).json()["overridden"] == []
    _error(admin.patch("/api/queues/jobs", json={"lease": -1}), 400)
    assert admin.post("/api/queues/jobs/purge").json() == {"purged": 3}
    assert broker.get_queue("jobs").stats().backlog == 0


def test_rule_32_delete_queue_is_refused_while_it_holds_messages(admin: httpx.Client,
                                                         broker: hailq.Broker) -> None:
    _declare(admin)
    admin.post("/api/queues/jobs/messages", json={"body": 1})
    _error(admin.delete("/api/queues/jobs"), 409, "queue_not_empty")
    assert broker.get_queue("jobs").stats().ready == 1
    r = admin.delete("/api/queues/jobs", params={"force": "true"})
    assert r.json() == {"deleted": True, "messages_deleted": 1}
    assert broker.queues() == []
    _error(admin.delete("/api/queues/jobs"), 404)


def test_rule_32_topics_subscribe_publish_unsubscribe_delete(admin: httpx.Client,
                                                     broker: hailq.Broker) -> None:
    _error(admin.post("/api/topics/orders/publish", json={"body": 1}), 404)
    assert admin.put("/api/topics/orders").json() == {"name": "orders"}
    r = admin.post("/api/topics/orders/subscriptions",
                   json={"subscription": "billing", "filter": {"kind": ["paid"]}})
    assert r.status_code == 200, r.text
    admin.post("/api/topics/orders/subscriptions", json={"subscription": "audit"})
    topics = admin.get("/api/topics").json()["topics"]
    assert topics == [{"name": "orders", "subscriptions": [
        {"queue": "audit", "filter": None}, {"queue": "billing", "filter": {"kind": ["paid"]}}]}]
    copies = admin.post("/api/topics/orders/publish", json={"messages": [
        {"body": "paid", "headers": {"kind": "paid"}},
        {"body": "draft", "headers": {"kind": "draft"}}]}).json()["copies"]
    assert set(copies[0]) == {"audit", "billing"} and set(copies[1]) == {"audit"}
    assert broker.get_queue("billing").stats().ready == 1
    _error(admin.delete("/api/topics/orders"), 409, "topic_has_subscriptions")
    assert admin.delete("/api/topics/orders/subscriptions/billing").json() == \
        {"unsubscribed": True}
    _error(admin.delete("/api/topics/orders/subscriptions/billing"), 404)
    r = admin.delete("/api/topics/orders", params={"force": "true"}).json()
    assert r == {"deleted": True, "subscriptions_removed": 1}
    assert broker.topics() == []
    assert {q.name for q in broker.queues()} == {"audit", "billing"}  # the queues stay


def test_rule_25_workers_schedules_autoscalers_desired_workers(admin: httpx.Client,
                                                       broker: hailq.Broker) -> None:
    _declare(admin)
    now = broker.now()
    ops(broker).save_worker(hailq.models.WorkerInfo("w-1", "host-a", 123, ["jobs"], 4, 1, now, now,
                                               "running"))
    workers = admin.get("/api/workers").json()["workers"]
    assert [(w["id"], w["host"], w["queues"]) for w in workers] == [("w-1", "host-a", ["jobs"])]
    assert workers[0]["seen_ago"] >= 0
    broker.schedule(every=60, queue="jobs", body={"tick": True}, name="tick")
    schedules = admin.get("/api/schedules").json()["schedules"]
    assert [(s["name"], s["body"], s["every"]) for s in schedules] == [("tick", {"tick": True},
                                                                         60.0)]
    assert admin.get("/api/autoscalers").json() == {"autoscalers": []}
    for workers, action in ((1, "grow"), (2, "hold")):
        ops(broker).record_autoscale(hailq.AutoscalerInfo(
            "host-a:7:jobs", "jobs", "host-a", 7, workers, 2, action, f"{action} it", 0.0,
            ceiling=4, minimum=1, maximum=8, throughput=12.5, handler_time=0.2))
    [last] = admin.get("/api/autoscalers").json()["autoscalers"]
    assert (last["queue"], last["workers"], last["decision"], last["ceiling"]) == \
        ("jobs", 2, "hold", 4)
    one = admin.get("/api/autoscalers", params={"queue": "jobs"}).json()
    assert [d["decision"] for d in one["decisions"]] == ["hold", "grow"]  # newest first
    assert admin.get("/api/autoscalers", params={"queue": "no such!"}).status_code == 400
    admin.post("/api/queues/jobs/messages", json={"body": 1})
    doc = admin.get("/api/desired_workers").json()
    assert [q["queue"] for q in doc["queues"]] == ["jobs"] and doc["queues"][0]["ready"] == 1
    one = admin.get("/api/desired_workers", params={"queue": "jobs"}).json()
    assert one["queue"] == "jobs" and "desired_workers" in one
    _error(admin.get("/api/desired_workers", params={"queue": "nope"}), 404)


def test_rule_25_metrics_are_the_exporters_figures(admin: httpx.Client,
                                                   broker: hailq.Broker) -> None:
    from hailq.observe.prometheus import collect_figures, exposition

    _declare(admin)
    admin.post("/api/queues/jobs/messages", json={"messages": [{"body": 1}, {"body": 2}]})
    r = admin.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    assert 'hailq_queue_messages{queue="jobs",state="ready"} 2.0' in r.text
    def steady(text: str) -> list[str]:  # the oldest message's age grows between reads
        return [line for line in text.splitlines() if "oldest_ready_age" not in line]

    assert steady(r.text) == steady(exposition(collect_figures(broker)).decode())


def test_unknown_route_and_method_answer_json(admin: httpx.Client) -> None:
    _error(admin.get("/api/nothing-here"), 404)
    r = admin.request("PATCH", "/api/topics")
    assert r.status_code == 405 and "error" in r.json()


def test_a_topic_deleted_while_the_topics_are_listed_is_left_out(
        admin: httpx.Client, broker: hailq.Broker, monkeypatch: pytest.MonkeyPatch) -> None:
    broker.topic("kept").subscribe("audit")
    broker.topic("gone")
    listed = broker.topics()  # the topics, read just before an operator deletes one
    broker.delete_topic("gone")
    monkeypatch.setattr(type(broker), "topics", lambda self: listed)
    r = admin.get("/api/topics")
    assert r.status_code == 200, r.text
    assert r.json()["topics"] == [
        {"name": "kept", "subscriptions": [{"queue": "audit", "filter": None}]}]
    from hailq.serve.pages_data import topics

    assert [t["name"] for t in topics(broker)] == ["kept"]
