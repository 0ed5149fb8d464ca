"""Rules 25 and 36 for consumers in other languages: messages received and settled over
HTTP get their wait and handler time counted by the broker where claims and acks
happen, once each, as a worker's and a loop's are; on SQLite and on PostgreSQL."""

from __future__ import annotations

import time
from typing import Any

import httpx

import hailq
from hailq.ids import receipt_claim
from waiting import wait_for

from .conftest import CLIENT, Server


def _priorities(admin: httpx.Client, queue: str) -> dict[int, dict[str, Any]]:
    r = admin.get(f"/api/queues/{queue}")
    assert r.status_code == 200, r.text
    return {p["priority"]: p for p in r.json()["priorities"]}


def _until(admin: httpx.Client, queue: str, started: dict[int, int],
           ) -> dict[int, dict[str, Any]]:
    """The queue's per-priority figures once they count ``started`` (flushed each second)."""
    def counted() -> dict[int, dict[str, Any]] | None:
        found = _priorities(admin, queue)
        return found if all(found.get(p, {}).get("started") == n
                            for p, n in started.items()) else None

    found: dict[int, dict[str, Any]] = wait_for(counted, 60, what=f"{queue}: {started}",
                                                step=0.2)
    return found


def test_rule_25_http_consumers_get_wait_handler_time_and_breaches(server: Server) -> None:
    admin, client = server.client(), server.client(CLIENT)
    assert admin.put("/api/queues/portal", json={"slo": {"9": 0.25}}).status_code == 200
    sent = client.post("/api/queues/portal/messages", json={"messages": [
        *({"body": {"n": i}, "priority": 9} for i in range(3)),
        *({"body": {"n": i}, "priority": 1} for i in range(2))]})
    assert sent.status_code == 200, sent.text
    assert _priorities(admin, "portal").get(9, {}).get("started", 0) == 0
    time.sleep(0.35)  # the scenario: every message waits past priority 9's target of 0.25 s
    got = client.post("/api/queues/portal/receive",
                      json={"max_messages": 10, "wait": 5}).json()["messages"]
    assert sorted(m["priority"] for m in got) == [1, 1, 9, 9, 9]
    time.sleep(0.15)  # the scenario: the consumer's handler runs (past 0.1 s, below)
    high = [m["receipt"] for m in got if m["priority"] == 9]
    low = [m["receipt"] for m in got if m["priority"] == 1]
    acked = client.post("/api/queues/portal/ack", json={"receipts": [*high, low[0]]})
    assert all(r["acked"] for r in acked.json()["results"]), acked.text
    failed = client.post("/api/queues/portal/nack",
                         json={"receipt": low[1], "delay": 60, "error": "boom"})
    assert failed.status_code == 200, failed.text
    # The claims may have gone out in a flush before the acks: write the rest now.
    assert server.broker.figures is not None
    server.broker.figures.flush()

    found = _until(admin, "portal", {9: 3, 1: 2})
    p9, p1 = found[9], found[1]
    assert p9["slo"] == 0.25 and p9["breaches"] == 3 and p9["compliance"] == 0.0
    assert p9["wait_p50"] is not None and p9["wait_p50"] > 0.25
    assert p9["handler_p50"] is not None and p9["handler_p50"] > 0.1
    assert p1["wait_p99"] is not None and p1["handler_p99"] is not None
    assert p1["breaches"] == 0 and p1["slo"] is None
    shown = admin.get("/api/queues/portal").json()
    assert shown["figures"]["breaches"] == 3
    figures = server.broker.get_queue("portal").figures()
    assert sum(s.finished for s in figures.slots) == 5  # four acked, one failed


def test_rule_25_a_lost_lease_or_a_second_ack_records_nothing_more(server: Server) -> None:
    admin, client = server.client(), server.client(CLIENT)
    admin.put("/api/queues/jobs", json={})
    admin.put("/api/queues/other", json={})
    client.post("/api/queues/jobs/messages", json={"body": "x"})
    got = client.post("/api/queues/jobs/receive", json={"lease": 30}).json()["messages"]
    receipt = got[0]["receipt"]
    # Given back on the wrong queue: nothing changes, and it is still measured below.
    wrong = client.post("/api/queues/other/ack", json={"receipts": [receipt]}).json()
    assert wrong["results"][0]["acked"] is False
    assert client.post("/api/queues/other/nack", json={"receipt": receipt}).status_code == 409
    extended = client.post("/api/queues/jobs/extend", json={"receipt": receipt, "seconds": 60})
    assert extended.status_code == 200, extended.text
    assert client.post("/api/queues/jobs/ack", json={"receipts": [receipt]}).status_code == 200
    again = client.post("/api/queues/jobs/ack", json={"receipts": [receipt]}).json()
    assert again["results"][0]["acked"] is False
    lost = client.post("/api/queues/jobs/nack", json={"receipt": receipt})
    assert lost.status_code == 409, lost.text
    assert _until(admin, "jobs", {0: 1})[0]["started"] == 1
    assert server.broker.figures is not None
    server.broker.figures.flush()  # what the next flush would write, written now: still one
    assert _priorities(admin, "jobs")[0]["started"] == 1


def test_rule_36_a_receipt_acked_in_another_process_carries_its_claim_time(
        broker: hailq.Broker, url: str) -> None:
    """The receipt keeps the claim's priority and time: whoever acks it, in any process,
    counts the handler time; a receipt of the older form (without them) still acks."""
    queue = broker.queue("jobs")
    queue.send_many([hailq.Envelope("a", priority=7), hailq.Envelope("b", priority=7)])
    held = queue.receive(2, lease=30)
    receipts = [m.receipt for m in held]
    claim = receipt_claim(receipts[0])
    assert claim is not None and claim[0] == 7 and abs(claim[1] - broker.now()) < 5
    time.sleep(0.3)  # the scenario: the other process's handler runs (0.3 s, below)
    other = hailq.connect(url)
    try:
        older_form = receipts[1].rsplit(".", 1)[0]  # as receipts were made before
        assert receipt_claim(older_form) is None
        assert other.get_queue("jobs").ack_many([receipts[0], older_form]) == [False, False]
    finally:
        other.close()  # writes its figures
    assert broker.figures is not None
    broker.figures.flush()
    [p7] = queue.figures().priorities
    assert p7.started == 2  # both claims counted here, where they happened
    assert p7.handler_max is not None and 0.3 <= p7.handler_max < 5  # one handler time
    assert sum(s.finished for s in queue.figures().slots) == 1


def test_rule_25_hailq_serve_writes_the_last_figures_as_it_stops(broker: hailq.Broker,
                                                                 url: str) -> None:
    """A real ``hailq serve`` process stopped with Ctrl-C right after an ack: the figures
    of its last second are written as it stops, not lost."""
    from .test_security_cli import Serve

    broker.queue("jobs").send("x")
    serve = Serve(url, "--token", "t0ken")
    try:
        serve.wait_ready()
        with httpx.Client(base_url=f"http://127.0.0.1:{serve.port}", timeout=60,
                          headers={"Authorization": "Bearer t0ken"}) as c:
            [m] = c.post("/api/queues/jobs/receive", json={}).json()["messages"]
            acked = c.post("/api/queues/jobs/ack", json={"receipts": [m["receipt"]]})
            assert acked.json()["results"][0]["acked"] is True
    finally:
        _, err = serve.finish()
    assert serve.process.returncode in (0, 130), err  # 130: stopped by Ctrl-C
    assert "Traceback" not in err
    [p0] = broker.get_queue("jobs").figures().priorities
    assert p0.started == 1 and p0.handler_p50 is not None


def test_rule_32_a_target_an_operator_sets_elsewhere_counts_from_the_next_receive(
        server: Server, url: str) -> None:
    admin, client = server.client(), server.client(CLIENT)
    assert admin.put("/api/queues/portal", json={"slo": {"9": 60}}).status_code == 200

    def one_cycle() -> None:
        sent = client.post("/api/queues/portal/messages", json={"body": 1, "priority": 9})
        assert sent.status_code == 200, sent.text
        time.sleep(0.2)  # the scenario: it waits 0.2 s, under 60 s, over 0.05 s
        [m] = client.post("/api/queues/portal/receive", json={"wait": 5}).json()["messages"]
        acked = client.post("/api/queues/portal/ack", json={"receipts": [m["receipt"]]})
        assert acked.json()["results"][0]["acked"], acked.text

    assert server.broker.figures is not None
    one_cycle()
    server.broker.figures.flush()
    before = _until(admin, "portal", {9: 1})[9]
    assert before["slo"] == 60 and before["breaches"] == 0, before
    with hailq.connect(url) as operator:  # another process: the operator's CLI, say
        operator.configure("portal", slo={9: 0.05})
    one_cycle()  # received and acked over HTTP within a second of the change
    server.broker.figures.flush()
    after = _until(admin, "portal", {9: 2})[9]
    # The wait received under 60 s kept; the one received under 0.05 s missed it.
    assert after["slo"] == 0.05 and after["breaches"] == 1, after
    assert after["compliance"] == 0.5
