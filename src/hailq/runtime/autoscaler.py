"""``hailq autoscale``'s loop (SPEC rule 24): worker processes for one queue, sized by
``hailq.policy.autoscale.decide`` once per interval.

Each tick measures the window since the last one from the broker (completions from the
queue's counters, the mean handler time from the difference of its handler-time
histograms, the backlog), asks the policy, starts or drains processes, logs the decision
with its reason and stores it in the broker's database (``Broker.autoscalers()``,
``hailq stats``).

Children are ``hailq worker`` processes (the same ``WorkerSpec``) started with the
``spawn`` method. Scale-in sends SIGTERM to the youngest: it stops receiving, finishes
what it holds within ``--grace`` and exits, so nothing is redelivered. A draining child
still counts against ``--max`` until it has exited: this autoscaler never runs more
than ``--max`` processes of its own. If the autoscaler dies without a word (SIGKILL),
its children must not consume on unsupervised: on Linux each child asks the kernel for
SIGTERM when its parent dies (``prctl(PR_SET_PDEATHSIG)``), and on every system it also
watches its parent's pid once a second; either way it drains and exits.
"""

from __future__ import annotations

import ctypes
import json
import logging
import math
import multiprocessing
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from multiprocessing.process import BaseProcess
from typing import TYPE_CHECKING

from hailq.errors import HailqError
from hailq.internal import ops
from hailq.models import AutoscalerInfo
from hailq.outage import covers
from hailq.policy.autoscale import Decision, Limits, Observation, State, decide
from hailq.runtime import logs
from hailq.runtime.held import DeathRecorder, HeldTable, exit_cause, held_text
from hailq.runtime.signals import StopFlag
from hailq.runtime.supervisor import ChildrenRunner, WorkerSpec, _stop_when_orphaned

if TYPE_CHECKING:
    from hailq.broker import Broker
    from hailq.observe.figures import QueueFigures

log = logging.getLogger("hailq.autoscale")

PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _child_main(spec: WorkerSpec, parent: int, held: HeldTable | None = None) -> None:
    """A worker process of the autoscaler: drains when told, and when its parent is gone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the autoscaler forwards SIGTERM instead
    logs.configure(spec.log_level, json_lines=spec.json_logs, pid_in_text=True)
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM))
        except (OSError, AttributeError):  # pragma: no cover - the watch below still runs
            log.debug("prctl(PR_SET_PDEATHSIG) unavailable; watching the parent's pid")
    if os.getppid() != parent:  # died before the request above took hold
        os.kill(os.getpid(), signal.SIGTERM)
    threading.Thread(target=_stop_when_orphaned, args=(parent,),
                     name="hailq-parent-watch", daemon=True).start()
    spec.run(signals=(signal.SIGTERM,), held=held)


@dataclass
class _Child:
    process: BaseProcess
    started: float
    draining: bool = False
    held: HeldTable | None = None  # the leases it holds, shared with it (runtime/held.py)


@dataclass(frozen=True)
class Counters:
    """What one tick read, for the difference with the next."""

    at: float  # monotonic
    completed: int  # acked + nacked since the queue was declared
    sent: int
    handler_count: int
    handler_total: float


class Autoscaler(ChildrenRunner):
    """Keeps between ``limits.minimum`` and ``limits.maximum`` worker processes of
    ``spec`` for ``queue``, one decision every ``interval`` seconds, until stopped."""

    def __init__(self, broker: Broker, spec: WorkerSpec, queue: str, limits: Limits, *,
                 interval: float = 5.0, trace: str | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.broker = broker
        self.spec = replace(spec, queues=(queue,), weights={},
                            concurrency=limits.concurrency)
        self.queue = queue
        self.limits = limits
        self.interval = interval
        self.trace = trace  # a file to append each window and decision to, as JSON lines
        self._clock = clock
        self._flag = StopFlag()
        self._children: list[_Child] = []
        self._state = State()
        self._last: Counters | None = None
        self._settled_since: float | None = None  # every child registered and running
        self.id = f"{socket.gethostname()}:{os.getpid()}:{queue}"
        self.decisions: list[Decision] = []
        self._context = multiprocessing.get_context("spawn")
        self._deaths = DeathRecorder(spec.url, broker)  # fails what a dead child held

    # -- the loop: decide every interval until stopped, then drain the children --------

    def _main(self) -> int:
        log.info("autoscaling queue %r between %d and %d worker process(es) of %d "
                 "thread(s), deciding every %g s", self.queue, self.limits.minimum,
                 self.limits.maximum, self.limits.concurrency, self.interval)
        try:
            self._resize(self.limits.minimum)
            next_tick = self._clock() + self.interval
            next_look = 0.0
            while not self._flag.stopping:
                self._reap()
                now = self._clock()
                try:
                    if self._settled_since is None and now >= next_look:
                        next_look = now + 0.5
                        if self._ready():  # a window of the new pool starts now
                            self._settled_since = now
                            self._last = self._read(now)
                            next_tick = now + self.interval
                    if now >= next_tick:
                        next_tick = now + self.interval
                        self._tick()
                except HailqError as exc:  # the database may come back: keep the pool
                    if not covers(exc):  # the outage's lines say it (hailq/outage.py)
                        log.warning("autoscale tick failed, keeping %d worker(s): %s",
                                    len(self._live()), exc)
                time.sleep(0.1)
        finally:
            self._drain_all()
            self._record_stop()
        return 0

    def _read(self, now: float) -> Counters:
        return counters_of(self.broker.get_queue(self.queue).figures(), now)

    def _tick(self) -> None:
        figures = self.broker.get_queue(self.queue).figures()
        now = self._clock()
        counters = counters_of(figures, now)
        last, self._last = self._last, counters
        live = self._live()
        if last is None:
            return  # the first window starts now
        settled = self._settled_since is not None and self._settled_since <= last.at
        obs = observe(figures, last, counters, workers=len(live), settled=settled)
        decision = decide(self._state, obs, self.limits)
        self._state = decision.state
        self.decisions.append(decision)
        level = logging.INFO if decision.action != "hold" else logging.DEBUG
        log.log(level, "queue %s: %s %d -> %d worker(s) (backlog wants %d): %s", self.queue,
                decision.action, obs.workers, decision.workers, decision.desired,
                decision.reason)
        self._resize(decision.workers)
        self._record(obs, decision)
        if self.trace is not None:
            self._trace(self.trace, obs, decision)

    def _trace(self, path: str, obs: Observation, decision: Decision) -> None:
        """Append the window and the decision, so the run can be replayed through the
        policy (tests/policy replays such recordings)."""
        line: dict[str, object] = {"observation": asdict(obs), "decision": {
            "workers": decision.workers, "action": decision.action,
            "desired": decision.desired, "reason": decision.reason}}
        if not self.decisions[:-1]:
            line["limits"] = asdict(self.limits)
        try:
            with open(path, "a", encoding="utf-8") as out:
                out.write(json.dumps(line) + "\n")
        except OSError as exc:
            log.warning("could not write the trace to %s: %s", path, exc)

    def _record(self, obs: Observation, decision: Decision) -> None:
        info = AutoscalerInfo(
            id=self.id, queue=self.queue, host=socket.gethostname(), pid=os.getpid(),
            workers=decision.workers, desired=decision.desired, decision=decision.action,
            reason=decision.reason, at=0.0, ceiling=decision.ceiling,
            minimum=self.limits.minimum, maximum=self.limits.maximum,
            throughput=obs.throughput, handler_time=obs.handler_time)
        try:
            ops(self.broker).record_autoscale(info)
        except HailqError as exc:
            if not covers(exc):  # the outage's lines say it (hailq/outage.py)
                log.warning("could not store the autoscale decision: %s", exc)

    def _record_stop(self) -> None:
        """A last row, so no one reads the last decision as a pool still running; the
        saturation point it measured stays (desired_workers keeps it ten minutes)."""
        last = self.decisions[-1] if self.decisions else None
        info = AutoscalerInfo(
            id=self.id, queue=self.queue, host=socket.gethostname(), pid=os.getpid(),
            workers=0, desired=last.desired if last else 0, decision="stop",
            reason="stopped: every worker drained", at=0.0,
            ceiling=last.ceiling if last else None, minimum=self.limits.minimum,
            maximum=self.limits.maximum)
        try:
            ops(self.broker).record_autoscale(info)
        except HailqError as exc:
            log.warning("could not store the autoscaler's stop: %s", exc)

    def _ready(self) -> bool:
        """Every live child has registered as running and none is draining."""
        if any(c.draining for c in self._children):
            return False
        pids = {c.process.pid for c in self._live()}
        host = socket.gethostname()
        running = {w.pid for w in self.broker.workers() if w.state == "running"
                   and w.host == host and self.queue in w.queues}
        return pids <= running

    # -- processes -----------------------------------------------------------------------

    def _live(self) -> list[_Child]:
        return [c for c in self._children if not c.draining and c.process.is_alive()]

    def _reap(self) -> None:
        """Forget exited children; a child that died unasked is logged (the next tick sees
        one worker fewer and decides again, within --max)."""
        for child in list(self._children):
            if child.process.is_alive():
                continue
            child.process.join(0)
            self._children.remove(child)
            code = child.process.exitcode
            held = child.held.take() if child.held is not None else []
            if not child.draining or code != 0:
                log.warning("worker process %s exited with %s%s", child.process.pid,
                            exit_cause(code), held_text(held))
                self._settled_since = None
            if held and code != 0:  # each attempt fails now, with the cause
                self._deaths.fail(code, held)

    def _resize(self, wanted: int) -> None:
        live = self._live()
        if wanted < len(live):  # the youngest go first: the oldest have warmed up
            for child in sorted(live, key=lambda c: c.started)[wanted:]:
                child.draining = True
                self._settled_since = None
                if child.process.pid is not None:
                    os.kill(child.process.pid, signal.SIGTERM)
                log.info("draining worker process %s", child.process.pid)
            return
        # Children still draining count too: never more than --max processes at once.
        room = self.limits.maximum - len(self._children)
        for _ in range(min(wanted - len(live), max(room, 0))):
            held = HeldTable(self.spec.concurrency, self._context)
            process = self._context.Process(target=_child_main,
                                            args=(self.spec, os.getpid(), held),
                                            name="hailq-worker", daemon=False)
            process.start()
            self._children.append(_Child(process, self._clock(), held=held))
            self._settled_since = None
            log.info("started worker process %s", process.pid)

    def _drain_all(self) -> None:
        children = [c for c in self._children if c.process.is_alive()]
        log.info("autoscaler stopping: draining %d worker process(es)", len(children))
        forwarded = 0
        deadline = self._clock() + self.spec.grace + self.spec.poll + 10.0
        while any(c.process.is_alive() for c in children) and self._clock() < deadline:
            while forwarded < min(max(self._flag.requests, 1), 2):
                forwarded += 1
                for child in children:
                    if child.process.is_alive() and child.process.pid is not None:
                        os.kill(child.process.pid, signal.SIGTERM)
            time.sleep(0.05)
        for child in children:
            if child.process.is_alive():
                log.error("worker process %s did not stop in time; killing it (its messages "
                          "return when their leases end)", child.process.pid)
                child.process.kill()
            child.process.join(5.0)


def observe(figures: QueueFigures, last: Counters, counters: Counters, *, workers: int,
            settled: bool) -> Observation:
    """The window from ``last`` to ``counters`` and the queue as ``figures`` show it now:
    the backlog, the settings, and for a queue in deadline order its target pool."""
    handled = counters.handler_count - last.handler_count
    settings = figures.settings
    s = figures.stats
    return Observation(
        workers=workers, settled=settled, elapsed=max(counters.at - last.at, 1e-3),
        completed=max(counters.completed - last.completed, 0),
        sent=max(counters.sent - last.sent, 0),
        handler_time=(counters.handler_total - last.handler_total) / handled
        if handled > 0 else None,
        ready=s.ready, in_flight=s.in_flight, oldest_ready_age=s.oldest_ready_age,
        rate=settings.rate_per_second, slo=tuple((settings.slo or {}).values()),
        max_in_flight=settings.max_in_flight, paused=s.paused,
        target=figures.deadline_pool, target_reason=figures.desired_workers_reason)


def counters_of(figures: QueueFigures, at: float) -> Counters:
    s = figures.stats
    count = sum(h.count for h in figures.handler.values())
    total = sum(h.total for h in figures.handler.values())
    return Counters(at=at, completed=s.acked + s.nacked, sent=s.sent,
                     handler_count=count, handler_total=total)


def reprobe_ticks(seconds: float, interval: float) -> int:
    """Ticks of ``interval`` seconds in ``seconds`` (at least one)."""
    return max(math.ceil(seconds / interval), 1)
