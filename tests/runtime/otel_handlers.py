"""An app traced by ``hailq.otel``, run by tests/runtime/test_otel.py in a worker process.

It exports its finished spans in memory (the SDK's ``InMemorySpanExporter``) and writes
each, as one JSON line, to ``HAILQ_TEST_EFFECTS`` + ``.spans`` for the test to read.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Sequence

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from span_json import as_json

import hailq
import hailq.otel
from hailq.runtime import App


class ToFile(InMemorySpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = super().export(spans)
        with open(os.environ["HAILQ_TEST_EFFECTS"] + ".spans", "a") as f:
            for span in spans:
                f.write(json.dumps(as_json(span)) + "\n")
        return result


provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(ToFile()))
trace.set_tracer_provider(provider)
tracer = trace.get_tracer("claims-checker")

app = App("traced")
hailq.otel.instrument(app=app)


@app.handler("claims")
def check(message: hailq.Message) -> None:
    with tracer.start_as_current_span("check claim"):
        pass


@app.handler("claims-async")
async def check_later(message: hailq.Message) -> None:
    await asyncio.sleep(0)
    with tracer.start_as_current_span("check claim"):
        await asyncio.sleep(0)


@app.handler("claims-wrong", max_attempts=1)
def reject(message: hailq.Message) -> None:
    raise ValueError("the claim is wrong")
