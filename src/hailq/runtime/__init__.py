"""The worker runtime: run handlers over queues (SPEC rules 18 and 23).

>>> from hailq.runtime import App, Worker
>>> app = App()
>>> @app.handler("claims", lease=300, max_attempts=5)
... def check_claim(message): ...
>>> Worker(hailq.connect(url), app, concurrency=8).run()   # until SIGTERM

The command line runs the same: ``hailq worker module:app --concurrency 8``.
"""

from hailq.runtime.app import App, Handler, Route, load_target
from hailq.runtime.order import RoundRobinOrder, StrictOrder, WeightedOrder, parse_weights
from hailq.runtime.outcome import Outcome, outcome_of, short_traceback
from hailq.runtime.supervisor import ProcessPool, WorkerSpec
from hailq.runtime.timelimit import HandlerCancelled, HandlerInterrupted, TimeLimitExceeded
from hailq.runtime.worker import Worker

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
