"""The worker runtime: run handlers over queues (SPEC rules 18 and 23).

>>> from hailq.runtime import App, Worker
>>> app = App()
>>> @app.handler("claims", lease=300, max_attempts=5)
... def check_claim(message): ...
>>> Worker(hailq.connect(url), app, concurrency=8).run()   # until SIGTERM

The command line runs the same: ``hailq worker module:app --concurrency 8``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hailq.runtime.app import App, Handler, Route, load_target
    from hailq.runtime.order import RoundRobinOrder, StrictOrder, WeightedOrder, parse_weights
    from hailq.runtime.outcome import Outcome, outcome_of, short_traceback
    from hailq.runtime.supervisor import ProcessPool, WorkerSpec
    from hailq.runtime.timelimit import HandlerCancelled, HandlerInterrupted, TimeLimitExceeded
    from hailq.runtime.worker import Worker

# Loaded on first use: a part of the runtime that a broker needs (the service shape its
# figures' flusher runs on) must not bring the worker, its process pool and the
# Prometheus client with it.
_HOMES = {
    "App": "app", "Handler": "app", "Route": "app", "load_target": "app",
    "RoundRobinOrder": "order", "StrictOrder": "order", "WeightedOrder": "order",
    "parse_weights": "order", "Outcome": "outcome", "outcome_of": "outcome",
    "short_traceback": "outcome", "ProcessPool": "supervisor", "WorkerSpec": "supervisor",
    "HandlerCancelled": "timelimit", "HandlerInterrupted": "timelimit",
    "TimeLimitExceeded": "timelimit", "Worker": "worker",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'hailq.runtime' has no attribute {name!r}")
    return getattr(importlib.import_module(f"hailq.runtime.{home}"), name)

__all__ = [
    "App",
    "Handler",
    "HandlerCancelled",
    "HandlerInterrupted",
    "Outcome",
    "ProcessPool",
    "RoundRobinOrder",
    "Route",
    "StrictOrder",
    "TimeLimitExceeded",
    "WeightedOrder",
    "Worker",
    "WorkerSpec",
    "load_target",
    "outcome_of",
    "parse_weights",
    "short_traceback",
]
