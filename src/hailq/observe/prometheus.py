"""The figures as Prometheus metrics, with the official ``prometheus_client``.

Names follow what RabbitMQ's exporter taught users (``docs/operations/monitoring.md``
lists them for dashboards). Every series is queue-wide, read from the broker's
database at scrape time, so any number of exporters report the same values and
summing over them is never needed. ``desired_workers()`` is the JSON that KEDA's
``metrics-api`` trigger and other autoscalers read.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from hailq.broker import Broker
from hailq.observe.figures import QueueFigures
from hailq.observe.histogram import Histogram
from hailq.observe.limits import LimitCollector

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
STATES = ("ready", "scheduled", "in_flight", "blocked", "dead")


def collect_figures(broker: Broker) -> list[QueueFigures]:
    """Every declared queue's figures (reads only)."""
    return [q.figures() for q in broker.queues()]


class QueueCollector(Collector):
    """Yields hailq's metric families from the figures ``source`` returns per scrape."""

    def __init__(self, source: Callable[[], list[QueueFigures]]) -> None:
        self._source = source

    def collect(self) -> Iterator[Metric]:
        found = self._source()
        messages = GaugeMetricFamily(
            "hailq_queue_messages", "Messages of the queue by state, now.",
            labels=["queue", "state"])
        oldest = GaugeMetricFamily(
            "hailq_queue_oldest_ready_age_seconds",
            "Seconds the oldest ready message has waited (0 when none is ready).",
            labels=["queue"])
        desired = GaugeMetricFamily(
            "hailq_queue_desired_workers",
            "Worker processes the queue wants (Little's law, backlog and service levels).",
            labels=["queue"])
        sent = GaugeMetricFamily(
            "hailq_queue_sent_per_second",
            "Messages of each priority sent per second over the last minute, as the sends "
            "recorded them: the arrival rates that size a queue in deadline order.",
            labels=["queue", "priority"])
        workers = GaugeMetricFamily(
            "hailq_queue_workers", "Worker processes consuming the queue now.",
            labels=["queue"])
        counters = {name: CounterMetricFamily(f"hailq_messages_{name}", text, labels=["queue"])
                    for name, text in (
                        ("sent", "Messages sent to the queue."),
                        ("acked", "Messages acked (deleted for good)."),
                        ("nacked", "Nacks, dead-letterings by a handler included."),
                        ("redelivered", "Receives of a message received before."),
                        ("dead_lettered", "Messages that became dead."),
                        ("late_acks", "Acks after the lease had ended."))}
        breaches = CounterMetricFamily(
            "hailq_slo_breaches", "Messages that waited longer than their priority's "
            "service-level target.", labels=["queue", "priority"])
        histograms = {kind: HistogramMetricFamily(
            f"hailq_{kind}_seconds", text, labels=["queue", "priority"])
            for kind, text in (("wait", "Seconds from available to handler start."),
                               ("handler", "Seconds a handler ran."))}
        for f in found:
            s = f.stats
            for state in STATES:
                messages.add_metric([f.queue, state], getattr(s, state))
            oldest.add_metric([f.queue], s.oldest_ready_age or 0.0)
            desired.add_metric([f.queue], f.desired_workers)
            workers.add_metric([f.queue], f.workers)
            for name, family in counters.items():
                family.add_metric([f.queue], getattr(s, name))
            for p in f.priorities:
                sent.add_metric([f.queue, str(p.priority)], p.sent_per_second_1m)
                if p.slo is not None:
                    breaches.add_metric([f.queue, str(p.priority)], p.breaches)
            for kind, by_priority in (("wait", f.wait), ("handler", f.handler)):
                for priority, h in sorted(by_priority.items()):
                    histograms[kind].add_metric([f.queue, str(priority)], _buckets(h),
                                                h.total)
        yield messages
        yield oldest
        yield from counters.values()
        yield from histograms.values()
        yield breaches
        yield sent
        yield workers
        yield desired


def _buckets(h: Histogram) -> list[tuple[str, float]]:
    return [("+Inf" if math.isinf(le) else _le(le), float(n)) for le, n in h.cumulative()]


def _le(value: float) -> str:
    return repr(float(value))


def exposition(figures: list[QueueFigures]) -> bytes:
    """The Prometheus text format of these figures."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(QueueCollector(lambda: figures))
    registry.register(LimitCollector(lambda: figures))  # what alert rules compare with
    return generate_latest(registry)


def desired_workers(figures: list[QueueFigures]) -> dict[str, Any]:
    """``{"at", "queues": [{"queue", "desired_workers", "workers", ...}]}`` as JSON."""
    return {"at": figures[0].at if figures else None,
            "queues": [{"queue": f.queue, "desired_workers": f.desired_workers,
                        "workers": f.workers, "concurrency": f.concurrency,
                        "ready": f.stats.ready, "in_flight": f.stats.in_flight,
                        "oldest_ready_age": f.stats.oldest_ready_age,
                        # Deadline order (rule 41): why no pool meets every target.
                        "reason": f.desired_workers_reason} for f in figures],
            "total": sum(f.desired_workers for f in figures)}


def desired_workers_of(figures: list[QueueFigures], queue: str | None) -> dict[str, Any] | None:
    """``desired_workers(figures)``, or with ``queue`` that queue's entry with ``at`` (what
    KEDA reads with ``valueLocation: desired_workers``); None when no such queue. The
    exporter and ``hailq serve`` both answer with this."""
    doc = desired_workers(figures)
    if not queue:
        return doc
    chosen = [q for q in doc["queues"] if q["queue"] == queue]
    return {"at": doc["at"], **chosen[0]} if chosen else None
