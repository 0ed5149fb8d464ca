"""One finished span as the OpenTelemetry tests compare it (tests/runtime/test_otel.py)."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace import ReadableSpan


def as_json(span: ReadableSpan) -> dict[str, Any]:
    """What the test compares of one span."""
    context = span.get_span_context()
    assert context is not None
    return {
        "name": span.name, "kind": span.kind.name,
        "trace_id": f"{context.trace_id:032x}", "span_id": f"{context.span_id:016x}",
        "parent_id": f"{span.parent.span_id:016x}" if span.parent else None,
        "links": [f"{link.context.trace_id:032x}/{link.context.span_id:016x}"
                  for link in span.links],
        "attributes": dict(span.attributes or {}),
        "status": span.status.status_code.name,
        "events": [event.name for event in span.events],
    }
