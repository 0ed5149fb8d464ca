"""A worker process's own series and probes (``hailq worker --metrics-port``).

Only what belongs to this process: its handler time, its outcomes, its slots and
how many are busy. The queue-wide figures come from the exporter (``hailq
metrics``), so summing this over pods never double-counts a queue gauge. The same
port answers Kubernetes' probes: ``/healthz`` while the worker's loops run (also
while it drains: killing a draining worker would cut its grace short), ``/readyz``
while it takes new work.

With ``--pool process`` the pod is still one scrape target: the children write
their series into files of prometheus-client's multiprocess mode (a folder the
supervisor makes and removes), and the supervisor alone serves the port, summing
them (``shared_series``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from http.server import ThreadingHTTPServer
from typing import Literal

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead

from hailq.observe.histogram import DEFAULT_BOUNDS
from hailq.observe.http import PlainHandler
from hailq.observe.prometheus import CONTENT_TYPE
from hailq.runtime.service import Service

log = logging.getLogger("hailq.worker")


BUSY_EVERY = 0.5  # seconds between samples of the busy slots of a pool's child


class ProcessSeries:
    """This process's series in a registry of its own.

    ``shared``: a child of the process pool, whose values go to the multiprocess
    files the supervisor serves (the environment of the child names the folder).
    Its gauges then sum over the live children, and the busy slots are sampled
    every ``BUSY_EVERY`` seconds, since a gauge's callback cannot cross processes."""

    def __init__(self, concurrency: int, busy: Callable[[], int], *,
                 shared: bool = False) -> None:
        self.registry = CollectorRegistry()
        self._sampler: _BusySampler | None = None
        self._handler = Histogram(
            "hailq_worker_handler_seconds", "Seconds a handler of this process ran.",
            ["queue"], buckets=DEFAULT_BOUNDS, registry=self.registry)
        self._messages = Counter(
            "hailq_worker_messages", "Messages this process handled, by outcome.",
            ["queue", "outcome"], registry=self.registry)
        mode: Literal["livesum", "all"] = "livesum" if shared else "all"
        Gauge("hailq_worker_slots", "Handler slots of this process.",
              registry=self.registry, multiprocess_mode=mode).set(concurrency)
        busy_gauge = Gauge("hailq_worker_slots_busy",
                           "Handler slots of this process running a handler.",
                           registry=self.registry, multiprocess_mode=mode)
        if not shared:
            busy_gauge.set_function(lambda: float(busy()))
            return
        self._sampler = _BusySampler(lambda: busy_gauge.set(busy()))
        self._sampler.start()

    def close(self) -> None:
        """Stop sampling (a shared series)."""
        if self._sampler is not None:
            self._sampler.close(0.0)

    def observe(self, queue: str, handler: float, ok: bool) -> None:
        self._handler.labels(queue).observe(handler)
        self._messages.labels(queue, "ok" if ok else "failed").inc()


class _BusySampler(Service):
    """Samples a pool child's busy slots into its shared gauge every ``BUSY_EVERY``."""

    name = "hailq-busy-slots"

    def __init__(self, sample: Callable[[], None]) -> None:
        super().__init__(BUSY_EVERY, wait_first=True)
        self._sample = sample

    def tick(self) -> float | None:
        self._sample()
        return None


def shared_series(folder: str) -> Callable[[], bytes]:
    """The exposition of every pool child's series written to ``folder``, summed."""
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=folder)  # type: ignore[no-untyped-call]
    return lambda: generate_latest(registry)


def forget_process(folder: str, pid: int) -> None:
    """Drop a dead child's live gauges from ``folder`` (its counters stay counted)."""
    mark_process_dead(pid, path=folder)  # type: ignore[no-untyped-call]


class ProcessServer:
    """Serves /metrics, /healthz and /readyz on ``host:port`` in a daemon thread.

    ``series``: this process's series, or a function returning the exposition (the
    pool's supervisor serving its children's)."""

    def __init__(self, host: str, port: int,
                 series: ProcessSeries | Callable[[], bytes], *,
                 alive: Callable[[], bool], ready: Callable[[], bool]) -> None:
        if isinstance(series, ProcessSeries):
            registry = series.registry
            exposition: Callable[[], bytes] = lambda: generate_latest(registry)  # noqa: E731
        else:
            exposition = series

        class Handler(PlainHandler):
            server_version = "hailq-worker"
            logger = log

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._send(200, CONTENT_TYPE, exposition())
                elif path in ("/healthz", "/readyz"):
                    ok = alive() if path == "/healthz" else ready()
                    self._send(200 if ok else 503, "text/plain; charset=utf-8",
                               b"ok\n" if ok else b"no\n")
                else:
                    self._send(404, "text/plain; charset=utf-8", b"not found\n")

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.2},
                                        name="hailq-metrics", daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
