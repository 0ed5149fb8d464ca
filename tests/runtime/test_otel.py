"""hailq.otel across a real worker process: the producer span of a send (here) and the
consumer span of its handler run (there) are one trace, linked through the headers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import hailq
import hailq.otel

from .conftest import StartWorker
from .span_json import as_json
from .support import wait_for


def _spans(effects: str) -> list[dict[str, Any]]:
    path = Path(effects + ".spans")
    return [json.loads(line) for line in path.read_text().splitlines()] \
        if path.exists() else []


@pytest.mark.parametrize("queue", ["claims", "claims-async"])
def test_the_consumer_span_continues_the_producers_trace(
        url: str, start_worker: StartWorker, effects: str, queue: str) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with hailq.connect(url) as broker:
        hook = hailq.otel.instrument(broker=broker, tracer_provider=provider)
        assert hailq.otel.instrument(broker=broker) is not hook and broker.hooks == [hook]
        with provider.get_tracer("portal").start_as_current_span("POST /claims"):
            sent = broker.queue(queue).send({"claim": 4711}, ordering_key="policy-9")
        [producer, request] = [as_json(s) for s in exporter.get_finished_spans()]
        assert producer["parent_id"] == request["span_id"]
        assert producer["name"] == f"send {queue}" and producer["kind"] == "PRODUCER"
        assert producer["attributes"] == {
            "messaging.system": "hailq", "messaging.destination.name": queue,
            "messaging.operation.type": "send", "messaging.operation.name": "send",
            "messaging.message.id": sent}
        start_worker("otel_handlers:app", "-q", queue)
        spans = wait_for(lambda: len(s := _spans(effects)) >= 2 and s, timeout=30,
                         what="the worker's spans")
    [inner] = [s for s in spans if s["name"] == "check claim"]
    [consumer] = [s for s in spans if s["kind"] == "CONSUMER"]
    assert consumer["name"] == f"process {queue}"
    assert consumer["trace_id"] == producer["trace_id"] == request["trace_id"]
    assert consumer["parent_id"] == producer["span_id"]
    assert consumer["links"] == [f"{producer['trace_id']}/{producer['span_id']}"]
    assert consumer["attributes"] == {
        "messaging.system": "hailq", "messaging.destination.name": queue,
        "messaging.operation.type": "process", "messaging.operation.name": "process",
        "messaging.message.id": sent, "messaging.hailq.attempt": 1,
        "messaging.hailq.ordering_key": "policy-9"}
    assert consumer["status"] == "UNSET"
    # The handler's own span (in a coroutine too) is the consumer span's child.
    assert inner["parent_id"] == consumer["span_id"]


def test_a_failed_handler_run_is_an_error_span_with_its_exception(
        url: str, start_worker: StartWorker, effects: str) -> None:
    with hailq.connect(url) as broker:
        hailq.otel.instrument(broker=broker)  # the global provider: a no-op here
        sent = broker.queue("claims-wrong", max_attempts=1).send({"claim": 4711})
        start_worker("otel_handlers:app", "-q", "claims-wrong")
        [consumer] = wait_for(lambda: _spans(effects), timeout=30, what="the worker's span")
        wait_for(lambda: broker.get_queue("claims-wrong").stats().dead == 1,
                 what="the dead letter")
    assert consumer["name"] == "process claims-wrong"
    assert consumer["attributes"]["messaging.message.id"] == sent
    assert consumer["parent_id"] is None and consumer["links"] == []  # nothing was traced
    assert consumer["status"] == "ERROR"
    assert consumer["events"] == ["exception"]
