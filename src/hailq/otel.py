"""OpenTelemetry tracing for hailq, built on its hooks (``pip install 'hailq[otel]'``).

>>> import hailq.otel
>>> hailq.otel.instrument(app=app, broker=broker)   # doctest: +SKIP

Every send or publish gets a producer span (kind PRODUCER, named ``send QUEUE`` or
``publish TOPIC``) whose trace context travels in each message's headers
(``traceparent``, ``tracestate``; the globally configured propagator, W3C trace context
by default). Every handler run gets a consumer span (kind CONSUMER, ``process QUEUE``)
that is a child of the producer span and links to it, current while the handler runs
(async handlers included), so the handler's own spans nest under it. A handler's
exception is recorded on its span, which ends with an error status. Attributes follow
OpenTelemetry's messaging semantic conventions: ``messaging.system`` ("hailq"),
``messaging.destination.name``, ``messaging.operation.type`` and ``.name``,
``messaging.message.id``, ``messaging.batch.message_count`` (batches),
``messaging.hailq.ordering_key`` and ``messaging.hailq.attempt``.

This module imports ``opentelemetry`` (the API only); ``import hailq`` does not.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from opentelemetry import propagate, trace
from opentelemetry.trace import Link, SpanKind, TracerProvider

from hailq.hooks import Hook

if TYPE_CHECKING:
    from hailq.broker import Broker
    from hailq.message import Message
    from hailq.runtime.app import App

__all__ = ["TracingHook", "instrument"]

SYSTEM = "hailq"


class TracingHook(Hook):
    """Producer spans around sends and consumer spans around handler runs (see the module
    doc). ``tracer_provider``: by default the global one."""

    def __init__(self, tracer_provider: TracerProvider | None = None) -> None:
        from hailq import __version__

        self._tracer = trace.get_tracer("hailq", __version__, tracer_provider=tracer_provider)

    # -- sends -------------------------------------------------------------------------

    def around_send(self, destination: str, operation: str) -> AbstractContextManager[Any]:
        return self._tracer.start_as_current_span(
            f"{operation} {destination}", kind=SpanKind.PRODUCER,
            attributes={"messaging.system": SYSTEM,
                        "messaging.destination.name": destination,
                        "messaging.operation.type": "send",
                        "messaging.operation.name": operation})

    def before_send(self, destination: str, headers: dict[str, str]) -> None:
        propagate.inject(headers)  # the current span: the producer span just started

    def after_send(self, destination: str, ids: list[str]) -> None:
        span = trace.get_current_span()
        if len(ids) == 1:
            span.set_attribute("messaging.message.id", ids[0])
        else:
            span.set_attribute("messaging.batch.message_count", len(ids))

    # -- handler runs ------------------------------------------------------------------

    def around_handler(self, message: Message) -> AbstractContextManager[Any]:
        sent = propagate.extract(message.headers)
        producer = trace.get_current_span(sent).get_span_context()
        links = [Link(producer)] if producer.is_valid else []
        attributes: dict[str, str | int] = {
            "messaging.system": SYSTEM,
            "messaging.destination.name": message.queue,
            "messaging.operation.type": "process",
            "messaging.operation.name": "process",
            "messaging.message.id": message.id,
            "messaging.hailq.attempt": message.attempt,
        }
        if message.ordering_key is not None:
            attributes["messaging.hailq.ordering_key"] = message.ordering_key
        # Exceptions passing out (the handler's) are recorded and set the error status.
        return self._tracer.start_as_current_span(
            f"process {message.queue}", context=sent, kind=SpanKind.CONSUMER, links=links,
            attributes=attributes)


def instrument(*, app: App | None = None, broker: Broker | None = None,
               tracer_provider: TracerProvider | None = None) -> TracingHook:
    """Trace ``app``'s handler runs and ``broker``'s sends (either or both) with one
    ``TracingHook``, returned. An app or broker that already has a ``TracingHook`` is
    left as it is."""
    hook = TracingHook(tracer_provider)
    if app is not None and not any(isinstance(h, TracingHook) for h in app.hooks):
        app.hook(hook)
    if broker is not None and not any(isinstance(h, TracingHook) for h in broker.hooks):
        broker.add_hook(hook)
    return hook
