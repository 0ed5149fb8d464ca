"""The worker: receive, run handlers, settle, and shut down in two stages (SPEC rules 18, 23).

Lifecycle:

- *running*: the fetch loop asks for work for free slots only; each message
  runs in a slot while the lease keeper renews its lease; the outcome acks
  (through the ack batcher), nacks or dead-letters it.
- *draining* (first SIGTERM/SIGINT or ``stop()``): receiving stops at once;
  handlers in flight may finish within ``grace`` seconds, leases still renewed.
- *give back* (grace over, or a second stop): messages still in flight are
  nacked with delay 0 (attempts were counted at receive), pending acks are
  flushed, and the worker records itself as *stopped*.

A SIGKILL skips all of this and loses nothing: the leases end and the
messages become receivable again (rule 8).

A handler past its time limit (rule 34) fails its attempt: the watchdog
records the failure first, then stops the handler (see ``timelimit``). A handler
whose message an operator cancelled (rule 40) is stopped the same way within a
second (``cancels``); its message is let go once it has stopped.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from typing import Literal

from hailq._time import Duration, seconds
from hailq.broker import Broker
from hailq.errors import HailqError, InvalidArgument, LeaseLost
from hailq.hooks import run_handler
from hailq.observe import inbox_use
from hailq.observe.process import ProcessSeries, ProcessServer
from hailq.queue import Message, Queue
from hailq.runtime.acks import AckBatcher
from hailq.runtime.app import App, Handler, app_for
from hailq.runtime.cancels import CancelWatch
from hailq.runtime.declare import declare_queues
from hailq.runtime.executor import LoopThread, SlotPool, call_handler
from hailq.runtime.fetcher import Fetcher
from hailq.runtime.heartbeat import LeaseKeeper
from hailq.runtime.held import HeldTable
from hailq.runtime.inflight import InFlight
from hailq.runtime.levels import LevelsRecorder
from hailq.runtime.logs import about
from hailq.runtime.maintenance import Maintenance, Upkeep
from hailq.runtime.order import Order, make_order
from hailq.runtime.outcome import Outcome, outcome_of
from hailq.runtime.registry import RegistryReporter, new_worker_id
from hailq.runtime.scheduler import Scheduler
from hailq.runtime.service import Services, Step
from hailq.runtime.settings_watch import SettingsWatch
from hailq.runtime.signals import STOP_SIGNALS, StopFlag, stop_on_signals
from hailq.runtime.summary import Tally, duration
from hailq.runtime.timelimit import EXIT_TIME_LIMIT, Running, Watchdog, check_time_limit

log = logging.getLogger("hailq.worker")

MAX_CONCURRENCY = 1000


class Worker:
    """Consumes queues with a pool of ``concurrency`` handler slots.

    ``handlers`` is an ``App``, a mapping queue -> handler, or one handler
    function (then ``queues`` is required). ``queues`` picks and orders the
    app's queues; by default each queue with ready work gets its turn
    (round-robin), ``order="strict"`` drains the first, then the next, and
    ``weights`` (``{"high": 3, "low": 1}``) shares slots by weight instead.
    Queues are declared with the app's settings when ``run()`` starts.

    ``run()`` blocks until ``stop()`` (or SIGTERM/SIGINT, when run in the main
    thread) and the two-stage shutdown are done. ``poll`` is the longest a
    long-poll waits before the worker looks again; ``registry_interval`` how
    often it records itself in the worker registry. ``metrics_port`` (with
    ``metrics_host``, 127.0.0.1 by default) serves this process's own series and
    its probes (``hailq/observe/process.py``); None serves nothing.

    ``time_limit`` (seconds) applies to handlers registered without one of their
    own: past it the attempt fails with a "time limit" error. A plain handler's
    thread that does not stop then is replaced by a new one (``stuck="replace"``),
    or, with ``stuck="exit"`` (the process pool's children), ends the process.

    With ``scheduler`` (the default) it also runs a scheduler that sends periodic
    messages (its app's and every other stored schedule's; ``hailq.runtime.scheduler``).
    It runs the broker's housekeeping, taking turns with the other processes
    (``hailq.runtime.maintenance``): ``upkeep`` names the duties (None: the usual ones;
    an empty list: none).
    """

    def __init__(self, broker: Broker, handlers: App | Mapping[str, Handler] | Handler, *,
                 queues: Sequence[str] | None = None, weights: Mapping[str, int] | None = None,
                 order: str | None = None,
                 concurrency: int = 1, grace: Duration = 30.0, poll: Duration = 1.0,
                 registry_interval: Duration = 3.0, worker_id: str | None = None,
                 time_limit: Duration | None = None,
                 stuck: Literal["replace", "exit"] = "replace",
                 scheduler: bool = True,
                 metrics_port: int | None = None, metrics_host: str = "127.0.0.1",
                 metrics_shared: bool = False,
                 held: HeldTable | None = None,
                 upkeep: Sequence[Upkeep] | None = None) -> None:
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) \
                or not 1 <= concurrency <= MAX_CONCURRENCY:
            raise InvalidArgument(f"concurrency must be an integer from 1 to {MAX_CONCURRENCY}, "
                                  f"got {concurrency!r}")
        if queues and weights:
            raise InvalidArgument("give queues or weights, not both")
        if stuck not in ("replace", "exit"):
            raise InvalidArgument(f"stuck must be 'replace' or 'exit', got {stuck!r}")
        self.time_limit = check_time_limit(time_limit)
        self.stuck = stuck
        self.broker = broker
        self.app = app_for(handlers, list(queues or weights or []))
        self.order: Order = make_order(list(queues) if queues else self.app.queues,
                                       weights, order)
        for name in self.order.queues:
            self.app.route(name)  # every consumed queue needs a handler
        self.concurrency = concurrency
        self.grace = seconds(grace, "grace")
        self.poll = max(seconds(poll, "poll"), 0.01)
        self.registry_interval = max(seconds(registry_interval, "registry_interval"), 0.1)
        self.worker_id = worker_id or new_worker_id()
        self._flag = StopFlag()
        # A process pool's child notes what it holds for its supervisor (runtime/held.py).
        self._inflight = InFlight(concurrency, held)
        self._queues: dict[str, Queue] = {}
        self.tally = Tally()
        self.scheduler = scheduler  # run a scheduler (rule 35) beside the consumers
        self.upkeep = upkeep
        self.metrics_address = None if metrics_port is None else (metrics_host, metrics_port)
        # A child of the process pool: its series go to the files its supervisor serves.
        self.metrics_shared = metrics_shared

    # -- control -----------------------------------------------------------------------

    def stop(self) -> None:
        """Begin the shutdown: the first call drains, a second gives back at once.

        Safe from any thread (``run()`` notices within a fraction of a second).
        """
        self._flag.request()

    @property
    def state(self) -> str:
        return "draining" if self._flag.stopping else "running"

    @property
    def in_flight(self) -> int:
        """Messages whose handler runs or whose outcome is being recorded."""
        return len(self._inflight)

    def run(self, *, handle_signals: bool = True,
            signals: tuple[signal.Signals, ...] = STOP_SIGNALS) -> None:
        """Consume until stopped, then drain and give back (see the class doc).

        In the main thread, ``signals`` (SIGTERM and SIGINT) stop the worker, unless
        ``handle_signals`` is False.
        """
        self._queues = declare_queues(self.broker, self.app, self.order.queues)
        for queue in self._queues.values():  # history names who ran each attempt (rule 40):
            queue.consumer = f"worker {self.worker_id}"  # and the slot, per claimed message
        services = _Services(self)
        # The signal handlers come first: once the registry lists this worker as running,
        # a SIGTERM must already mean "drain", not death by the default handler.
        begun = time.monotonic()
        with stop_on_signals(self._flag, signals) if handle_signals else nullcontext():
            services.start()
            try:
                self._serve(services)
            finally:
                services.close()
                self._log_summary(time.monotonic() - begun)

    def _log_summary(self, seconds: float, how: str = "stopped") -> None:
        log.info("worker %s %s after %s: %s", self.worker_id, how, duration(seconds),
                 self.tally.summary())

    def _serve(self, services: _Services) -> None:
        log.info("worker %s consuming %s at %s with %d slot(s)", self.worker_id,
                 ", ".join(self.order.queues), self.broker.url, self.concurrency)
        services.fetcher.start()
        while not self._flag.stopping:
            time.sleep(0.2)  # a signal handler only sets the flag; look at it 5 times a second
        # Stage 1: drain. Receiving has stopped; leases are still renewed.
        deadline = time.monotonic() + self.grace
        log.info("worker %s draining: %d in flight, grace %.1f s", self.worker_id,
                 self.in_flight, self.grace)
        services.registry.set_state("draining")
        while not self._inflight.wait_empty(min(deadline, time.monotonic() + 0.1)):
            if self._flag.hurry or time.monotonic() >= deadline:
                break
        services.fetcher.join(max(deadline - time.monotonic(), 0.0) + self.poll + 1.0)
        # Stage 2: give back whatever is still running.
        left = self._inflight.close()
        for message in left:
            services.keeper.release(message)
            self._give_back(message, "the worker stopped before the handler finished "
                                     f"(grace {self.grace:g} s)")
            self.tally.given_back += 1
        if left:
            log.warning("worker %s gave back %d unfinished message(s)", self.worker_id,
                        len(left))

    # -- one message -------------------------------------------------------------------

    def _dispatch(self, message: Message, services: _Services, slot: int) -> None:
        if not self._inflight.add(message, slot):
            self._give_back(message, "the worker was stopping when the message arrived")
            self.tally.given_back += 1
            return
        services.keeper.hold(message)
        route = self.app.route(message.queue)
        limit = route.time_limit if route.time_limit is not None else self.time_limit
        services.slots.submit(lambda: self._handle(message, route.handler, limit, services))

    def _handle(self, message: Message, handler: Handler, limit: float | None,
                services: _Services) -> None:
        if log.isEnabledFor(logging.DEBUG):
            log.debug("message %s of queue %s received (attempt %d of %d)", message.id,
                      message.queue, message.attempt, self._max_attempts(message),
                      extra=about(message))
        # Every handler may be stopped by a cancel (rule 40); only one with a time limit
        # is watched: the others cost no watchdog work.
        running = Running(message, limit)
        services.runs[message.receipt] = running
        error: BaseException | None = None
        began = time.monotonic()
        inbox_use.begin(message.id)
        if limit is not None:
            services.watchdog.watch(running)
        try:
            try:
                run_handler(self.app.hooks, message,
                            lambda: call_handler(handler, message, services.loop, running))
            finally:
                running.finish()
        except BaseException as exc:  # a handler's failure, whatever it is, fails the message
            error = exc
        services.runs.pop(message.receipt, None)
        if limit is not None:
            services.watchdog.forget(running)
        ran = time.monotonic() - began
        # Rule 36: the broker counts the wait at the claim and the handler time at the ack
        # or nack, to the end stamped here (acks are batched); the worker adds whether the
        # run used an inbox or an ack transaction (rule 26).
        message.handled()
        if inbox_use.end(message.id) and self.broker.figures is not None:
            self.broker.figures.inbox(message.queue, message.source.settings.slo,
                                      message.priority)
        if services.series is not None:
            services.series.observe(message.queue, ran, error is None)
        services.keeper.release(message)
        if not self._inflight.settle(message):
            if running.expired:
                log.debug("message %s of queue %s: the handler ended %.1f s after its time "
                          "limit; what it did then is ignored", message.id, message.queue,
                          ran - (limit or 0.0), extra=about(message))
            return  # given back after the grace period, or failed by its time limit
        try:
            if running.cancelled:
                self._let_go(message, ran)
            else:
                self._settle(message, outcome_of(error), services, ms=ran * 1000)
        finally:
            self._inflight.done(message)

    def _cancel(self, message: Message, services: _Services) -> None:
        """The cancel watch's call (rule 40): an operator cancelled ``message`` while its
        handler runs. Its lease is no longer renewed and the handler is stopped as a time
        limit stops it; the slot lets the message go once the handler has ended."""
        running = services.runs.get(message.receipt)
        services.keeper.release(message)
        if running is None:
            return  # it ended just now: its settlement lets it go (the ack is refused)
        how = running.stop(cancel=True)
        self.tally.cancelled += 1
        log.info("message %s of queue %s cancelled by an operator; its handler is asked to "
                 "stop", message.id, message.queue, extra=about(message))
        if how == "interrupted" and self.stuck == "exit":
            # A process-pool child ends as at a time limit: it receives nothing more
            # (its slot frees before it ends), and the message goes first.
            self._flag.request()
            if self._inflight.settle(message):
                try:
                    self._let_go(message, None)
                finally:
                    self._inflight.done(message)
            self._exit_for_time_limit(message, services, "its message was cancelled",
                                      "ended to stop a cancelled handler")

    def _let_go(self, message: Message, ran: float | None) -> None:
        """Remove a cancelled message whose handler has stopped: its max_in_flight slot
        and its ordering key are free again (rule 40)."""
        try:
            message.source.let_cancelled_go([message])
        except HailqError as exc:
            log.warning("message %s of queue %s: cancelled, but could not be let go (%s); "
                        "it goes when its lease ends", message.id, message.queue, exc,
                        extra=about(message))
            return
        if ran is not None:
            log.info("message %s of queue %s: its handler stopped %.2f s after it began; "
                     "cancelled", message.id, message.queue, ran, extra=about(message))

    def _expire(self, running: Running, services: _Services) -> None:
        """The watchdog's call at a handler's time limit: record the failure, then stop it."""
        message, limit = running.message, running.limit or 0.0
        if not self._inflight.settle(message):
            return  # it ended just now, or was given back
        try:
            services.keeper.release(message)
            self.tally.time_limited += 1
            self._settle(message, Outcome("nack", error=f"time limit ({limit:g} s) exceeded: "
                                                        "the handler was still running"),
                         services)
            if running.stop() != "interrupted":
                return  # ended by itself, or an async handler cancelled
            if self.stuck == "exit":
                self._exit_for_time_limit(message, services)
            stuck = services.slots.replace(running.thread)
            log.debug("message %s of queue %s: TimeLimitExceeded raised into its handler's "
                      "thread; a new thread takes the slot", message.id, message.queue,
                      extra=about(message))
            if stuck > 1:
                log.warning("%d handler threads past their time limit are still running "
                            "(blocked in calls an exception cannot interrupt); their slots "
                            "have new threads", stuck)
        finally:
            self._inflight.done(message)

    def _exit_for_time_limit(self, message: Message, services: _Services,
                             why: str = "time limit passed",
                             how: str = "ended by a time limit") -> None:
        """A process-pool child: the failure is recorded (or the cancelled message let
        go); end this process at once (no thread of it can be trusted to stop), after
        flushing acks of finished work."""
        log.warning("message %s of queue %s: %s; this worker process ends now and the "
                    "supervisor starts another", message.id, message.queue, why,
                    extra=about(message))
        self._flag.request()  # receive nothing more
        for other in self._inflight.close():  # with concurrency > 1: no failure of theirs
            services.keeper.release(other)
            self._give_back(other, "the worker process ended: another handler ran past "
                                   "its time limit")
            self.tally.given_back += 1
        services.acks.close(5.0)
        services.registry.set_state("stopped")
        self._log_summary(time.monotonic() - services.begun, how)
        for handler in logging.getLogger().handlers:
            handler.flush()
        os._exit(EXIT_TIME_LIMIT)

    def _max_attempts(self, message: Message) -> int:
        return self._queues[message.queue].settings.max_attempts

    def _settle(self, message: Message, outcome: Outcome, services: _Services, *,
                ms: float | None = None) -> None:
        if message.settled:  # the handler settled it itself (message.transaction(), nack ...)
            if outcome.action == "ack":
                self.tally.done += 1
            return
        if outcome.action == "ack":
            if ms is not None and log.isEnabledFor(logging.DEBUG):
                log.debug("message %s of queue %s done in %.0f ms", message.id, message.queue,
                          ms, extra=about(message))
            self.tally.done += 1
            services.acks.submit(message)
            return
        where = f"on attempt {message.attempt} of {self._max_attempts(message)}"
        last = message.attempt >= self._max_attempts(message)
        try:
            if outcome.action == "dead":
                message.dead_letter(outcome.error or "dead-lettered by its handler")
            else:
                message.nack(delay=outcome.delay, error=outcome.error)
        except LeaseLost:
            log.warning("message %s of queue %s: lease lost before its outcome was recorded",
                        message.id, message.queue, extra=about(message))
            return
        except HailqError as exc:
            log.error("message %s of queue %s: could not record its outcome (%s); it will "
                      "return when its lease ends", message.id, message.queue, exc,
                      extra=about(message))
            return
        except Exception:  # a bug of ours must not cost the slot: the lease still ends
            log.exception("message %s of queue %s: could not record its outcome; it will "
                          "return when its lease ends", message.id, message.queue,
                          extra=about(message))
            return
        why = _last_line(outcome.error)
        if outcome.action == "dead":
            self.tally.dead += 1
            log.warning("message %s of queue %s dead-lettered by its handler %s: %s",
                        message.id, message.queue, where, why, extra=about(message))
        elif last:
            self.tally.dead += 1
            did = "asked for a retry" if outcome.asked else "failed"
            log.error("message %s of queue %s %s %s, its last, and is dead-lettered: %s",
                      message.id, message.queue, did, where, why, extra=about(message))
        elif outcome.asked:
            self.tally.retried += 1
            after = "after the retry backoff" if outcome.delay is None \
                else f"in {outcome.delay:g} s"
            log.info("message %s of queue %s retried %s %s: %s", message.id, message.queue,
                     after, where, why, extra=about(message))
        else:
            self.tally.failed += 1
            log.warning("message %s of queue %s failed %s: %s", message.id, message.queue,
                        where, why, extra=about(message))

    def _give_back(self, message: Message, why: str) -> None:
        try:
            message.give_back(why)  # not a failure: it cannot die of a shutdown
        except HailqError as exc:
            log.warning("message %s of queue %s: could not give it back (%s); it returns "
                        "when its lease ends", message.id, message.queue, exc,
                        extra=about(message))


class _Services:
    """The worker's background duties, each its own small service, started in the
    order of ``all`` and closed in reverse (``hailq.runtime.service``)."""

    def __init__(self, worker: Worker) -> None:
        broker = worker.broker
        self.loop = LoopThread(broker)  # async handlers: hailq.aio's message type
        self.keeper = LeaseKeeper()
        # An operator's change reaches this worker's renewals and figures within a second.
        self.settings = SettingsWatch(broker, worker._queues, self.keeper.retime)
        self.acks = AckBatcher(worker._queues)
        self.series: ProcessSeries | None = None
        server: ProcessServer | None = None
        if worker.metrics_shared:
            self.series = ProcessSeries(worker.concurrency, lambda: worker.in_flight,
                                        shared=True)
        elif worker.metrics_address is not None:
            self.series = ProcessSeries(worker.concurrency, lambda: worker.in_flight)
            server = ProcessServer(
                *worker.metrics_address, self.series,
                alive=lambda: self.fetcher.alive or worker.state == "draining",
                ready=lambda: worker.state == "running" and self.fetcher.alive)
        self.slots = SlotPool(worker.concurrency)
        self.registry = RegistryReporter(
            broker, worker_id=worker.worker_id, queues=worker.order.queues,
            concurrency=worker.concurrency, in_flight=lambda: worker.in_flight,
            interval=worker.registry_interval, running=worker._inflight.running)
        self.fetcher = Fetcher(broker, worker._queues, worker.order, worker._inflight,
                               lambda m, n: worker._dispatch(m, self, n), worker._flag,
                               poll=worker.poll, acks=self.acks)
        self.watchdog = Watchdog(lambda running: worker._expire(running, self))
        self.runs: dict[str, Running] = {}  # receipt -> its handler's call, while it runs
        self.cancels = CancelWatch(worker._queues,
                                   lambda: [m for m, _ in worker._inflight.running()],
                                   lambda m: worker._cancel(m, self))
        self.begun = time.monotonic()
        figures = broker.figures
        # Closed in reverse: the registry's "stopped" is written last, after the acks
        # and the figures of the last handlers (the fetch loop has ended by then).
        self.all = Services([
            self.registry,
            Step(close=self.loop.close),
            Step(close=None if figures is None else figures.flush),
            self.keeper,
            self.settings,  # after the keeper, whose renewals it retimes
            self.acks,
            Step(close=None if self.series is None else self.series.close),
            Step(None if server is None else server.start,
                 None if server is None else server.close),
            Step(self.slots.start, self.slots.close),
            self.watchdog,
            self.cancels,  # stops handlers through the watchdog's mechanism
        ])
        if worker.scheduler:
            self.all.add(Scheduler(broker, worker.app.periodics))
        self.all.add(LevelsRecorder(broker))  # the dashboard's charts' history
        if worker.upkeep is None or worker.upkeep:
            self.all.add(Maintenance(broker, worker.upkeep))

    def start(self) -> None:
        self.all.start()

    def close(self) -> None:
        self.all.close()


def _last_line(text: str | None) -> str:
    return (text or "").strip().splitlines()[-1] if text and text.strip() else ""
