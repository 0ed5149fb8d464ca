"""``import hailq`` loads what a producer needs and no more: no worker runtime, no
Prometheus client, no cron parser, no web server until they are used."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("hailq.runtime", "hailq.serve", "hailq.cli", "prometheus_client", "croniter",
         "starlette", "uvicorn", "jinja2", "rich", "opentelemetry", "hailq.otel")


def _loaded(code: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", code + "\nimport sys, json\n"
                           "print(json.dumps(sorted(sys.modules)))"],
                          capture_output=True, text=True, timeout=60, check=True)
    return list(json.loads(done.stdout.splitlines()[-1]))


def test_import_hailq_loads_no_runtime_nor_exporter() -> None:
    loaded = _loaded("import hailq")
    assert [m for m in loaded if m.startswith(HEAVY)] == []


def test_app_and_worker_load_the_runtime_when_used() -> None:
    loaded = _loaded("import hailq\nassert hailq.App.__name__ == 'App'")
    assert "hailq.runtime.app" in loaded and "hailq.runtime.worker" not in loaded
    loaded = _loaded("import hailq\nassert hailq.Worker.__name__ == 'Worker'")
    assert "hailq.runtime.worker" in loaded


def test_a_producer_and_consumer_load_no_worker_nor_exporter(tmp_path: object) -> None:
    """Connecting with figures on, sending, receiving and acking: the figures' flusher
    runs on the runtime's service shape, and brings no worker, process pool or
    Prometheus client with it."""
    loaded = _loaded(
        f"import hailq\nb = hailq.connect('sqlite:///{tmp_path}/h.db')\n"
        "q = b.queue('claims')\nq.send({'n': 1})\n[m] = q.receive()\nm.ack()\nb.close()")
    heavy = ("hailq.runtime.worker", "hailq.runtime.supervisor", "hailq.runtime.app",
             "prometheus_client", "croniter", "starlette", "rich")
    assert [m for m in loaded if m.startswith(heavy)] == []
