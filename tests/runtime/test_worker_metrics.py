"""A worker's own ``--metrics-port`` (rule 25): this process's series only, and the
probes Kubernetes asks (deploy/keda/worker.yaml)."""

from __future__ import annotations

import signal
import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

import hailq
from ports import free_port

from .conftest import StartWorker
from .support import done, wait_for


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, ""


def test_rule_25_a_workers_metrics_port_serves_its_own_series_and_probes(
        broker: hailq.Broker, start_worker: StartWorker, effects: str) -> None:
    claims = broker.queue("claims")
    claims.send_many([{"n": n} for n in range(5)])
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    worker = start_worker("handlers:app", "-q", "claims", "-c", "3",
                          "--metrics-port", f"127.0.0.1:{port}")
    wait_for(lambda: get(f"{base}/readyz")[0] == 200, what="the worker to be ready")
    assert get(f"{base}/healthz")[0] == 200
    wait_for(lambda: len(done(effects)) == 5, what="the five messages")

    def series() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        text = get(f"{base}/metrics")[1]
        return {(s.name, tuple(sorted(s.labels.items()))): s.value
                for f in text_string_to_metric_families(text) for s in f.samples}

    found = wait_for(lambda: (s := series()).get(
        ("hailq_worker_handler_seconds_count", (("queue", "claims"),))) == 5 and s,
        what="five handler runs in the series")
    assert found[("hailq_worker_slots", ())] == 3
    assert found[("hailq_worker_messages_total", (("outcome", "ok"), ("queue", "claims")))] == 5
    assert not any(name.startswith("hailq_queue_") for name, _ in found)  # no queue gauges
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(30) == 0


def test_rule_25_a_process_pool_serves_the_sum_of_its_childrens_series_on_one_port(
        broker: hailq.Broker, start_worker: StartWorker, effects: str) -> None:
    claims = broker.queue("claims")
    claims.send_many([{"n": n} for n in range(6)])
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    worker = start_worker("handlers:app", "-q", "claims", "--pool", "process", "-c", "2",
                          "--metrics-port", f"127.0.0.1:{port}")
    wait_for(lambda: get(f"{base}/readyz")[0] == 200, what="the pool to be ready")
    wait_for(lambda: len(done(effects)) == 6, what="the six messages")

    def series() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        text = get(f"{base}/metrics")[1]
        return {(s.name, tuple(sorted(s.labels.items()))): s.value
                for f in text_string_to_metric_families(text) for s in f.samples}

    # One child may run all six before the other has written its first gauges.
    # A child counts a run's time, then its outcome: a scrape may fall in between.
    found = wait_for(lambda: (s := series()).get(
        ("hailq_worker_handler_seconds_count", (("queue", "claims"),))) == 6
        and s.get(("hailq_worker_messages_total", (("outcome", "ok"), ("queue", "claims"))))
        == 6 and s.get(("hailq_worker_slots", ())) == 2 and s,
        what="six handler runs summed over both children, both children counted")
    assert found[("hailq_worker_slots", ())] == 2  # one slot in each live child
    assert found[("hailq_worker_messages_total", (("outcome", "ok"), ("queue", "claims")))] == 6
    assert found[("hailq_worker_slots_busy", ())] == 0
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    assert get(f"{base}/healthz")[0] == 0  # the port closed with the pool


def test_metrics_port_refuses_a_bad_port(start_worker: StartWorker) -> None:
    for args in (["--metrics-port", "x"], ["--metrics-port", "70000"]):
        process = start_worker("handlers:app", "-q", "claims", *args)
        assert process.wait(30) == 2
