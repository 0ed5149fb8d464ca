"""``--pool process``: N child processes, each a thread worker of its own, under one parent.

Children are started with the ``spawn`` method, so nothing (no database
connection, no lock, no thread) is inherited: each child imports the target
and calls ``hailq.connect`` itself. The parent only supervises: it restarts a
child that died, and on SIGTERM/SIGINT forwards SIGTERM so every child drains
(a second signal is forwarded too: the children give back at once). Children
ignore SIGINT, so a Ctrl-C that reaches the whole process group counts once.

With ``--metrics-port`` the supervisor alone serves the port: the children write
their own series into a folder of prometheus-client's multiprocess files, which
the supervisor sums at each scrape and removes when it stops.

A child whose plain handler ran past its time limit records the failure and
ends itself with ``EXIT_TIME_LIMIT``; the supervisor starts its replacement at
once and does not count that exit as a crash (rule 34).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from multiprocessing.process import BaseProcess

from hailq.errors import InvalidArgument
from hailq.observe.process import ProcessServer, forget_process, shared_series
from hailq.runtime import logs
from hailq.runtime.app import App, Handler, app_for, load_target
from hailq.runtime.held import DeathRecorder, HeldTable, exit_cause, held_text
from hailq.runtime.order import StrictOrder, WeightedOrder
from hailq.runtime.signals import STOP_SIGNALS, StopFlag, stop_on_signals
from hailq.runtime.timelimit import EXIT_TIME_LIMIT

log = logging.getLogger("hailq.worker")

QUICK_DEATH = 5.0  # a child that dies sooner than this after its start counts as failing
# The pause before a slot whose children keep dying quickly starts the next one grows by
# this much per death in a row, up to MAX_PAUSE. The supervisor never gives up: a message
# that kills its process is a poison message like any other, and stopping the pool over
# it would stop every other message too (rule 15). Its attempts run out and it dies.
PAUSE_STEP = 0.5
MAX_PAUSE = 5.0


@dataclass
class _Slot:
    """One child's place in the pool: the running process, or when to start the next."""

    child: BaseProcess | None = None
    started: float = 0.0
    restart_at: float = 0.0
    quick_deaths: int = 0
    held: HeldTable | None = None  # the leases its child holds, shared with it


@dataclass(frozen=True)
class WorkerSpec:
    """Everything a process needs to build and run its worker; picklable."""

    url: str
    target: str
    queues: tuple[str, ...] = ()
    weights: Mapping[str, int] = field(default_factory=dict)
    order: str | None = None  # "strict" or "round-robin" (None: the default, or weights)
    concurrency: int = 1
    grace: float = 30.0
    poll: float = 1.0
    registry_interval: float = 3.0
    log_level: str = "INFO"
    json_logs: bool = False
    time_limit: float | None = None
    scheduler: bool = True  # run a scheduler of periodic messages beside the consumers
    metrics: tuple[str, int] | None = None  # --metrics-port: this process's series, probes
    metrics_shared: bool = False  # a pool's child: series to the supervisor's files

    def handlers(self) -> App:
        """Import the target and check it against the queues; InvalidArgument if they clash."""
        loaded: App | Handler = load_target(self.target)
        names = list(self.queues or self.weights)
        app = app_for(loaded, names)
        order = WeightedOrder(self.weights) if self.weights else \
            StrictOrder(names or app.queues)
        for name in order.queues:
            app.route(name)
        return app

    def run(self, signals: tuple[signal.Signals, ...] = STOP_SIGNALS, *,
            child: bool = False, held: HeldTable | None = None) -> None:
        """Connect, build the worker and run it until one of ``signals`` (in this process).

        A ``child`` of the process pool ends itself when a handler's thread runs past
        its time limit; a thread worker replaces the thread instead. ``held`` is where
        a child notes the leases it holds for its supervisor."""
        import hailq
        from hailq.runtime.worker import Worker

        app = self.handlers()
        with hailq.connect(self.url, migrate=False) as broker:
            if broker.schema_status()[0] == 0:
                # Workers may start first on a new database; on a mistyped path or schema
                # they would wait forever, beside the real one: say what was created.
                log.warning("no hailq schema at %s: created a new, empty one; if you "
                            "expected messages there, check the URL", broker.url)
            broker.migrate()
            Worker(broker, app, queues=self.queues or None, weights=self.weights or None,
                   order=self.order,
                   concurrency=self.concurrency, grace=self.grace, poll=self.poll,
                   registry_interval=self.registry_interval, time_limit=self.time_limit,
                   stuck="exit" if child else "replace",
                   scheduler=self.scheduler,
                   metrics_port=None if self.metrics is None else self.metrics[1],
                   metrics_host="127.0.0.1" if self.metrics is None else self.metrics[0],
                   metrics_shared=self.metrics_shared, held=held,
                   ).run(signals=signals)


def _child_main(spec: WorkerSpec, supervisor: int, held: HeldTable | None = None) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent forwards SIGTERM instead
    logs.configure(spec.log_level, json_lines=spec.json_logs, pid_in_text=True)
    # The supervisor's pid comes from the supervisor: one killed while this process was
    # still starting would leave os.getppid() already 1 here, and the watch blind.
    threading.Thread(target=_stop_when_orphaned, args=(supervisor,),
                     name="hailq-parent-watch", daemon=True).start()
    spec.run(signals=(signal.SIGTERM,), child=True, held=held)


def _stop_when_orphaned(parent: int, every: float = 1.0) -> None:
    """A supervisor killed with SIGKILL forwards nothing: its children would consume on,
    unsupervised, beside the replacement's. When the parent is gone, drain as on SIGTERM."""
    while os.getppid() == parent:
        time.sleep(every)
    log.warning("the supervisor (pid %d) is gone; this worker drains and stops", parent)
    os.kill(os.getpid(), signal.SIGTERM)


MAX_PROCESSES = 256


class ChildrenRunner:
    """Runs worker processes in the foreground until ``stop()`` or SIGTERM/SIGINT.

    ``stop()`` asks every child to drain; a second call, to give back at once (rule 23).
    """

    spec: WorkerSpec
    _flag: StopFlag

    def stop(self) -> None:
        """Ask every child to drain (a second call: to give back now)."""
        self._flag.request()

    def run(self, *, handle_signals: bool = True) -> int:
        """Run until stopped, then drain the children; return 0 once stopped."""
        self.spec.handlers()  # fail here, once, rather than in every child
        if handle_signals:
            with stop_on_signals(self._flag):
                return self._main()
        return self._main()

    def _main(self) -> int:
        """The runner's own loop, until stopped; its exit code (each subclass writes it)."""
        raise NotImplementedError


class ProcessPool(ChildrenRunner):
    """Runs ``processes`` children of ``spec`` and supervises them until a stop signal."""

    def __init__(self, spec: WorkerSpec, processes: int) -> None:
        if isinstance(processes, bool) or not isinstance(processes, int) \
                or not 1 <= processes <= MAX_PROCESSES:
            raise InvalidArgument(f"processes must be an integer from 1 to {MAX_PROCESSES}, "
                                  f"got {processes!r}")
        self.spec = spec
        self.processes = processes
        self._context = multiprocessing.get_context("spawn")
        self._metrics_dir: str | None = None  # the children's series, with --metrics-port
        self._flag = StopFlag()
        self.started = 0  # children started, the first ones included
        self.crashes = 0  # children that died unasked
        self.time_limits = 0  # children that ended themselves after a time limit
        self._slots: list[_Slot] = []
        self._deaths = DeathRecorder(spec.url)  # fails what a dead child held

    def _main(self) -> int:
        """Supervise until stopped, restarting children that exit; return 0 once stopped."""
        return self._supervise()

    def _start(self, slot: _Slot) -> None:
        spec = self.spec if self._metrics_dir is None else \
            replace(self.spec, metrics=None, metrics_shared=True)
        slot.child = self._context.Process(target=_child_main,
                                           args=(spec, os.getpid(), slot.held),
                                           name="hailq-worker", daemon=False)
        slot.child.start()
        slot.started = time.monotonic()
        self.started += 1

    def _supervise(self) -> int:
        begun = time.monotonic()
        log.info("worker pool of %d process(es) starting", self.processes)
        server = self._serve_metrics() if self.spec.metrics is not None else None
        try:
            return self._watch_children()
        finally:
            self._deaths.close()
            if server is not None:
                server.close()
            if self._metrics_dir is not None:
                shutil.rmtree(self._metrics_dir, ignore_errors=True)
            log.info("worker pool stopped after %.1f s: %d process(es) started, %d crashed, "
                     "%d ended by a time limit", time.monotonic() - begun, self.started,
                     self.crashes, self.time_limits)

    def _serve_metrics(self) -> ProcessServer:
        """The pod's one port: the children's series summed, and the pool's probes."""
        assert self.spec.metrics is not None
        self._metrics_dir = tempfile.mkdtemp(prefix="hailq-metrics-")
        # Read by prometheus-client when a spawned child imports it.
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = self._metrics_dir
        server = ProcessServer(*self.spec.metrics, shared_series(self._metrics_dir),
                               alive=lambda: True, ready=lambda: self._ready)
        server.start()
        return server

    @property
    def _ready(self) -> bool:
        return not self._flag.stopping and any(
            s.child is not None and s.child.is_alive() for s in self._slots)

    def _gone(self, slot: _Slot) -> None:
        """A child ended: forget its live gauges, then its process."""
        assert slot.child is not None
        if self._metrics_dir is not None and slot.child.pid is not None:
            forget_process(self._metrics_dir, slot.child.pid)
        slot.child.join(0)

    def _watch_children(self) -> int:
        slots = self._slots = [_Slot(held=HeldTable(self.spec.concurrency, self._context))
                               for _ in range(self.processes)]
        for slot in slots:
            self._start(slot)
        while not self._flag.stopping:
            time.sleep(0.1)
            now = time.monotonic()
            for slot in slots:
                if self._flag.stopping:
                    break
                if slot.child is None:
                    if now >= slot.restart_at:
                        self._start(slot)
                    continue
                if slot.child.is_alive():
                    continue
                if slot.child.exitcode == EXIT_TIME_LIMIT:
                    # Its handler ran past its time limit; the failure is recorded (a retry
                    # or a dead letter). No crash: no pause, and the quick deaths stand.
                    self.time_limits += 1
                    if slot.held is not None:
                        slot.held.take()  # the failure is recorded; the others given back
                    log.info("worker process %s ended itself after a handler's time limit; "
                             "starting another", slot.child.pid)
                    self._gone(slot)
                    self._start(slot)
                    continue
                self.crashes += 1
                quick = now - slot.started < QUICK_DEATH
                slot.quick_deaths = slot.quick_deaths + 1 if quick else 0
                pause = min(PAUSE_STEP * slot.quick_deaths, MAX_PAUSE)
                held = slot.held.take() if slot.held is not None else []
                log.warning("worker process %s exited with %s%s; restarting it%s",
                            slot.child.pid, exit_cause(slot.child.exitcode), held_text(held),
                            f" in {pause:g} s ({slot.quick_deaths} quick exits in a row)"
                            if pause else "")
                if held:  # each attempt fails now, with the cause, not "lease expired" later
                    self._deaths.fail(slot.child.exitcode, held)
                self._gone(slot)
                slot.child, slot.restart_at = None, now + pause
        self._stop_children([s.child for s in slots if s.child is not None])
        return 0

    def _stop_children(self, children: list[BaseProcess]) -> None:
        forwarded = 0
        deadline = time.monotonic() + self.spec.grace + self.spec.poll + 10.0
        while any(c.is_alive() for c in children) and time.monotonic() < deadline:
            while forwarded < min(self._flag.requests, 2):
                forwarded += 1
                for child in children:
                    if child.is_alive() and child.pid is not None:
                        os.kill(child.pid, signal.SIGTERM)
            time.sleep(0.05)
        for child in children:
            if child.is_alive():
                log.error("worker process %s did not stop in time; killing it (its messages "
                          "return when their leases end)", child.pid)
                child.kill()
            child.join(5.0)
