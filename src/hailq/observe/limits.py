"""The limits a queue's figures are judged against, as Prometheus series.

Alert rules compare a figure with its limit: the oldest ready message's age with the
service-level targets (``slo``), an autoscaler's workers with its ``--max``
(``deploy/prometheus/hailq-alerts.yaml``). Like the queue figures these are read from
the broker's database at scrape time and are the same from every exporter.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from hailq.observe.figures import QueueFigures


class LimitCollector(Collector):
    """Yields the service-level targets and each running autoscaler's bounds."""

    def __init__(self, source: Callable[[], list[QueueFigures]]) -> None:
        self._source = source

    def collect(self) -> Iterator[Metric]:
        target = GaugeMetricFamily(
            "hailq_queue_slo_target_seconds",
            "Service-level target of a priority: the longest a message should wait.",
            labels=["queue", "priority"])
        labels = ["queue", "autoscaler"]
        running = GaugeMetricFamily(
            "hailq_autoscaler_workers",
            "Worker processes an autoscaler runs, as of its last decision.", labels=labels)
        maximum = GaugeMetricFamily(
            "hailq_autoscaler_max_workers", "An autoscaler's --max.", labels=labels)
        for f in self._source():
            for priority, seconds in sorted((f.settings.slo or {}).items()):
                target.add_metric([f.queue, str(priority)], seconds)
            for a in f.autoscalers:
                if a.decision == "stop":  # stopped: it runs nothing and decides nothing
                    continue
                running.add_metric([f.queue, a.id], a.workers)
                maximum.add_metric([f.queue, a.id], a.maximum)
        yield target
        yield running
        yield maximum
