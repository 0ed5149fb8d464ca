"""``hailq metrics``: Prometheus text from the official client, scraped and parsed
(rule 25), and the exporter's /metrics and /desired_workers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

import hailq
from hailq.observe.exporter import make_server
from hailq.observe.prometheus import collect_figures
from hailq.observe.recorder import FigureRecorder

from .conftest import Hailq


def arrange(broker: hailq.Broker) -> None:
    """claims: 9 sent, 5 ready, 1 in flight, 1 dead; waits recorded for priorities 9, 0."""
    claims = broker.queue("claims", slo={9: 2, 0: 600}, max_attempts=1)
    claims.send_many(list(range(8)))
    for message in claims.receive(max_messages=2):
        message.ack()
    claims.send("poison", priority=9)
    (poison,) = claims.receive()
    poison.nack(error="boom")
    claims.receive()
    recorder = FigureRecorder(broker, ["claims"], lambda name: claims.settings.slo)
    for wait in (0.1, 1.0, 2.0, 3.0):
        recorder.observe("claims", 9, wait, 0.03, ok=True)
    recorder.observe("claims", 0, 0.2, 0.5, ok=False)
    recorder.flush()
    assert broker.figures is not None
    broker.figures.flush()  # and the loop's own claims and acks above (rule 36)
    broker.queue("audit")


def samples(text: str) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = tuple(sorted(s.labels.items()))
            found[(s.name, labels)] = s.value
        found[family.name] = family.type
    return found


def test_rule_25_metrics_are_prometheus_text_with_the_documented_names(
        hq_any: Hailq, api_any: hailq.Broker) -> None:
    arrange(api_any)
    result = hq_any("metrics")
    assert result.code == 0, result.err
    got = samples(result.out)
    q = (("queue", "claims"),)
    assert got["hailq_queue_messages"] == "gauge"
    assert got[("hailq_queue_messages", (("queue", "claims"), ("state", "ready")))] == 5
    assert got[("hailq_queue_messages", (("queue", "claims"), ("state", "in_flight")))] == 1
    assert got[("hailq_queue_messages", (("queue", "claims"), ("state", "dead")))] == 1
    assert got[("hailq_queue_oldest_ready_age_seconds", q)] >= 0
    for name, value in (("sent", 9), ("acked", 2), ("nacked", 1), ("redelivered", 0),
                        ("dead_lettered", 1), ("late_acks", 0)):
        assert got[f"hailq_messages_{name}"] == "counter"
        assert got[(f"hailq_messages_{name}_total", q)] == value
    assert got["hailq_wait_seconds"] == got["hailq_handler_seconds"] == "histogram"
    p9 = (("priority", "9"), ("queue", "claims"))
    # four observed, and the poison message the loop received (rule 36: every consumer)
    assert got[("hailq_wait_seconds_count", p9)] == 5
    assert got[("hailq_wait_seconds_bucket", (("le", "2.0"), *p9))] == 4  # the target's bound
    assert got[("hailq_wait_seconds_bucket", (("le", "0.005"), *p9))] <= 1
    assert got[("hailq_wait_seconds_bucket", (("le", "600.0"), *p9))] == 5
    assert got[("hailq_wait_seconds_bucket", (("le", "+Inf"), *p9))] == 5
    assert got[("hailq_wait_seconds_sum", p9)] == pytest.approx(6.1, abs=1.0)
    # one observed failure, and the two the loop acked
    assert got[("hailq_handler_seconds_count", (("priority", "0"), ("queue", "claims")))] == 3
    assert got[("hailq_slo_breaches_total", p9)] == 1
    assert got[("hailq_slo_breaches_total", (("priority", "0"), ("queue", "claims")))] == 0
    assert got[("hailq_queue_desired_workers", q)] >= 1  # ready work, no worker
    assert got[("hailq_queue_desired_workers", (("queue", "audit"),))] == 0


def test_rule_25_metrics_json_prints_the_desired_workers_document(
        hq_any: Hailq, api_any: hailq.Broker) -> None:
    arrange(api_any)
    result = hq_any("metrics", "--json")
    assert result.code == 0, result.err
    doc = result.json()  # JSON, not Prometheus text, as --json promises
    assert set(doc) == {"at", "queues", "total"}
    wanted = {q["queue"]: q["desired_workers"] for q in doc["queues"]}
    assert wanted["claims"] >= 1 and wanted["audit"] == 0  # ready work, no worker
    assert doc["total"] == sum(wanted.values())


@pytest.fixture
def exporter(api_any: hailq.Broker) -> Iterator[str]:
    server = make_server("127.0.0.1", 0, lambda: collect_figures(api_any))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


def get(url: str) -> tuple[int, str, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.headers["Content-Type"], response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read()


def test_rule_25_the_exporter_serves_metrics_and_desired_workers_as_json(
        api_any: hailq.Broker, exporter: str) -> None:
    arrange(api_any)
    status, kind, body = get(f"{exporter}/metrics")
    assert status == 200 and kind.startswith("text/plain")
    assert "hailq_wait_seconds_bucket" in samples(body.decode()).__repr__()
    status, kind, body = get(f"{exporter}/desired_workers")
    doc = json.loads(body)
    assert status == 200 and kind == "application/json"
    assert {q["queue"] for q in doc["queues"]} == {"claims", "audit"}
    assert doc["total"] == sum(q["desired_workers"] for q in doc["queues"])
    status, _, body = get(f"{exporter}/desired_workers?queue=claims")
    one = json.loads(body)
    assert one["queue"] == "claims" and one["desired_workers"] >= 1  # valueLocation
    assert get(f"{exporter}/desired_workers?queue=ghost")[0] == 404
    assert get(f"{exporter}/nothing")[0] == 404


def test_metrics_listen_serves_until_interrupted(sqlite_url: str) -> None:
    hailq.connect(sqlite_url).queue("claims").send(1)
    env = {k: v for k, v in os.environ.items() if k != "HAILQ_URL"}
    process = subprocess.Popen(
        [sys.executable, "-m", "hailq.cli.main", "metrics", "--listen", "127.0.0.1:0",
         "--url", sqlite_url], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
        env=env)
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        assert "serving /metrics" in line, line
        address = line.split("http://", 1)[1].split()[0]
        status, _, body = get(f"http://{address}/metrics")
        assert status == 200 and b'hailq_queue_messages{queue="claims",state="ready"} 1.0' in body
    finally:
        process.terminate()
        process.wait(30)


def test_metrics_refuses_a_bad_listen_address(hq: Hailq) -> None:
    hq("metrics", "--listen", "nowhere").assert_clean_error(2)


def test_rule_41_the_arrival_rate_of_each_priority_is_a_gauge(
        hq_any: Hailq, api_any: hailq.Broker, exporter: str) -> None:
    claims = api_any.queue("claims", slo={9: 10, 5: 60, 0: 600}, order="deadline")
    claims.send_many([hailq.Envelope(n, priority=9) for n in range(30)])
    claims.send_many(list(range(10)))
    api_any.queue("audit")
    result = hq_any("metrics")
    assert result.code == 0, result.err
    for got in (samples(result.out), samples(get(f"{exporter}/metrics")[2].decode())):
        assert got["hailq_queue_sent_per_second"] == "gauge"
        rate = {p: got[("hailq_queue_sent_per_second",
                        (("priority", p), ("queue", "claims")))] for p in ("9", "5", "0")}
        # Over one span (since the queue was made, under a minute ago): 30 to 10.
        assert rate["9"] > 0 and rate["9"] == pytest.approx(3 * rate["0"])
        assert rate["5"] == 0  # a target, nothing sent
        span = 40 / (rate["9"] + rate["0"])
        assert 1 <= span <= 60
    # What sizes the pool: the same figures as Queue.figures() gives.
    figures = {p.priority: p.sent_per_second_1m for p in claims.figures().priorities}
    assert figures[9] == pytest.approx(3 * figures[0]) and figures[5] == 0
