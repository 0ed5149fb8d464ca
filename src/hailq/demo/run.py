"""One run of the hailstorm: start everyone, let it happen, measure, clean up.

Timeline: the checkers start first and wait: a ``Worker`` with a slot for all
but two of them, the slow checker (a thread) and a checker process; a spare
checker process waits in reserve, and the statistics program waits for its
copies. The portal sends the burst. At 20% of the results the checker process
is told to crash: it is killed mid-check of its next claim, and the spare
takes its place, as a supervisor would restart it. At 30% the slow checker
starts the claim it is slower than its lease on. The run ends when nothing is
left to happen: every claim sent and counted by the statistics program, the
checkers' queue empty (every claim checked or dead), the slow claim over.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import hailq
from hailq.demo import results as results_db
from hailq.demo.checkers import SlowChecker, Tracker, make_check
from hailq.demo.children import Child, Line
from hailq.demo.report import Report, Waits, in_order
from hailq.demo.story import (
    CHECKS,
    MAX_ATTEMPTS,
    STATISTICS,
    TOPIC,
    Plan,
    ideal_makespan,
    make_claims,
)
from hailq.demo.workspace import Workspace
from hailq.runtime import App, Worker

CRASH_AT = 0.2  # share of results after which a checker crashes
SLOW_AT = 0.3  # ... and the slow checker takes a claim
SWITCH_INTERVAL = 0.001  # seconds; see Run.__init__


@dataclass
class Progress:
    """A snapshot for the live view."""

    plan: Plan
    elapsed: float
    sent: int
    results: int
    busy: int
    statistics: int
    throughput: float
    queue: hailq.QueueStats | None  # the checkers' queue as the broker counts it, once a second
    events: list[str] = field(default_factory=list)


class Run:
    """The demo's moving parts for one run. ``execute()`` returns the report."""

    def __init__(self, plan: Plan, workspace: Workspace) -> None:
        self.plan = plan
        self.ws = workspace
        self.claims = make_claims(plan)
        self.tracker = Tracker()
        self.batches: list[Line] = []
        self.statistics_count = 0
        self.crashed: Line | None = None
        self._rate: list[tuple[float, int]] = []
        self._queue_stats: hailq.QueueStats | None = None
        self._stats_at = 0.0
        self._drained_at = 0.0

    def execute(self, on_progress: Callable[[Progress], None] | None = None,
                timeout: float | None = None) -> Report:
        # 50 checker threads hand the interpreter around constantly; a shorter switch
        # interval lets a thread whose sleep (the check) ended run again sooner.
        previous = sys.getswitchinterval()
        sys.setswitchinterval(SWITCH_INTERVAL)
        logs = _quiet_worker_logs()
        try:
            return self._execute(on_progress, timeout)
        finally:
            sys.setswitchinterval(previous)
            logs()

    def _execute(self, on_progress: Callable[[Progress], None] | None,
                 timeout: float | None) -> Report:
        plan, ws, tracker = self.plan, self.ws, self.tracker
        limit = timeout or 60 + 10 * ideal_makespan(plan.claims * plan.check_seconds,
                                                     plan.checkers)
        broker = hailq.connect(ws.url)
        children: list[Child] = []
        worker: Worker | None = None
        thread: threading.Thread | None = None
        slow: SlowChecker | None = None
        try:
            checks, _ = self._declare(broker)
            store = results_db.ResultStore(ws.results_path)
            app = App("image-checkers")
            app.add(CHECKS, make_check(store, tracker))
            worker = Worker(broker, app, concurrency=plan.worker_slots, grace=plan.lease,
                            poll=0.5)
            thread = threading.Thread(target=worker.run, kwargs={"handle_signals": False},
                                      name="demo-worker", daemon=True)
            thread.start()
            slow = SlowChecker(checks, store, tracker)
            slow.start()
            crasher = self._checker_process("checker-crashes")
            spare = self._checker_process("checker-restarted")
            children += [crasher, spare]
            stats = Child("statistics", [ws.url, str(plan.claims), str(limit)],
                          ws.directory, self._on_statistics)
            children.append(stats)
            portal = Child("portal", [ws.url, *plan.to_args()], ws.directory,
                           self._on_batch)
            children.append(portal)
            for child in (crasher, spare, portal):
                child.wait_for("ready", 60)
            crasher.tell("go")
            portal.tell("go")
            start = time.monotonic()
            crash_told = restarted = False
            while True:
                now = time.monotonic()
                if not crash_told and tracker.results >= CRASH_AT * plan.claims:
                    crasher.tell("crash")
                    crash_told = True
                if not slow.take_next.is_set() and tracker.results >= SLOW_AT * plan.claims:
                    slow.take_next.set()
                if not restarted and crasher.process.poll() is not None:
                    # As a supervisor would: a checker process takes the dead one's place.
                    restarted = True
                    self._crashed(crasher)
                    spare.tell("go")
                if on_progress is not None:
                    if now - self._stats_at >= 1.0:  # a read: it does not block the writers
                        self._queue_stats, self._stats_at = checks.stats(), now
                    on_progress(self._progress(now - start))
                if self._finished(checks, portal, stats, slow):
                    break
                if now - start > limit:
                    tracker.event(f"gave up after {limit:.0f} s")
                    break
                time.sleep(0.05)
            if on_progress is not None:  # the last frame shows the broker's final count
                self._queue_stats = checks.stats()
                on_progress(self._progress(time.monotonic() - start))
            worker.stop()
            slow.stop.set()
            for child in (crasher, spare):
                child.finish(plan.lease + 10)
            slow.join(plan.lease + 10)
            thread.join(plan.lease + 10)
            report = self._report(checks, store)
            store.close()
            return report
        finally:
            if worker is not None and thread is not None and thread.is_alive():
                worker.stop()
                worker.stop()
                thread.join(10)
            if slow is not None:
                slow.join(10)
            for child in children:
                child.stop()
            broker.close()

    def _checker_process(self, name: str) -> Child:
        return Child("checker", [self.ws.url, self.ws.results_path, name], self.ws.directory,
                     self._on_checker, name=name)

    def _declare(self, broker: hailq.Broker) -> tuple[hailq.Queue, hailq.Queue]:
        plan = self.plan
        topic = broker.topic(TOPIC)
        checks = topic.subscribe(CHECKS, lease=plan.lease, max_attempts=MAX_ATTEMPTS,
                                 retry={"base": plan.retry_base, "factor": 2.0,
                                        "max": 30 * plan.retry_base, "jitter": 0.1})
        stats = topic.subscribe(STATISTICS, lease=plan.lease)
        return checks, stats

    # -- what the helper processes report ------------------------------------------------

    def _on_batch(self, line: Line) -> None:
        if "first" in line:
            self.batches.append(line)

    def _on_statistics(self, line: Line) -> None:
        self.statistics_count = int(line.get("count", self.statistics_count))

    def _on_checker(self, line: Line) -> None:
        tracker = self.tracker
        if "start" in line:
            tracker.start(int(line["start"]), int(line["attempt"]), float(line["at"]))
        elif "finish" in line:
            tracker.finish(bool(line["fresh"]), float(line["at"]))
        elif "event" in line:
            tracker.event(str(line["event"]))
        elif "crash" in line:
            self.crashed = line

    def _crashed(self, process: Child) -> None:
        """The crashing checker process is gone; say so, and free its place."""
        if self.crashed is None:
            self.tracker.event(f"checker process exited unexpectedly (exit code "
                               f"{process.process.returncode}); a new one takes its place")
            return
        self.tracker.abandon()
        self.tracker.event(f"checker process was killed mid-check of claim "
                           f"{self.crashed['crash']} (SIGKILL); a new one takes its place")

    # -- progress and the end --------------------------------------------------------------

    def _progress(self, elapsed: float) -> Progress:
        tracker = self.tracker
        now = time.monotonic()
        self._rate.append((now, tracker.results))
        while self._rate and now - self._rate[0][0] > 1.0:
            self._rate.pop(0)
        first_t, first_n = self._rate[0]
        rate = (tracker.results - first_n) / (now - first_t) if now > first_t else 0.0
        return Progress(self.plan, elapsed, sum(b["count"] for b in self.batches),
                        tracker.results, tracker.busy, self.statistics_count, rate,
                        self._queue_stats, [text for _, text in list(tracker.events)[-6:]])

    def _finished(self, checks: hailq.Queue, portal: Child, stats: Child,
                  slow: SlowChecker) -> bool:
        """True when nothing more can happen: every claim sent and counted, no claim left
        in the checkers' queue (ready, scheduled, blocked or leased), and the slow
        checker done with its slow claim. The usual end is every claim but the corrupt
        one checked; without that (claims lost) the queue is looked at once a second."""
        if not (portal.finished and stats.finished) or slow.busy_with_slow_claim:
            return False
        now = time.monotonic()
        if self.tracker.results < self.plan.claims - 1 and now - self._drained_at < 1.0:
            return False
        self._drained_at = now
        left = checks.stats()
        return left.ready + left.scheduled + left.blocked + left.in_flight == 0

    # -- the report --------------------------------------------------------------------

    def _report(self, checks: hailq.Queue, store: results_db.ResultStore) -> Report:
        plan, tracker = self.plan, self.tracker
        tally = results_db.tally(self.ws.results_path)
        stats = checks.stats()
        dead = checks.dead_letters()
        corrupt = {c.number for c in self.claims if c.corrupt}
        dead_numbers = {int(d.body["claim"]) for d in dead if isinstance(d.body, dict)}
        expected = {c.number for c in self.claims} - corrupt
        start = min((b["before"] for b in self.batches), default=0.0)
        makespan = max(tracker.last_result - start, 0.0)
        vip, normal = self._waits()
        crashed = int(self.crashed["crash"]) if self.crashed else None
        contracts = tally.order_by_contract
        return Report(
            backend=self.ws.display_url.split(":", 1)[0],
            claims=plan.claims, checkers=plan.checkers, scale=plan.scale,
            check_seconds=plan.check_seconds, lease_seconds=plan.lease,
            makespan=round(makespan, 4),
            ideal=round(ideal_makespan(sum(c.check_seconds for c in self.claims),
                                       plan.checkers), 4),
            send_seconds=round(max((b["after"] for b in self.batches), default=start)
                               - start, 4),
            results=tally.done, lost=len(expected - tally.done_claims),
            duplicates=tally.duplicated, skipped_by_inbox=store.skipped,
            partial_left=tally.partial, dead=len(dead),
            dead_claim_is_corrupt=dead_numbers == corrupt,
            redeliveries=stats.redelivered, crashed_claim=crashed,
            crashed_claim_redelivered=crashed is not None and crashed in tally.done_claims
            and tracker.redelivered.get(crashed, 0) >= 2,
            late_acks_rejected=tracker.late_acks_rejected,
            late_acks_accepted=tracker.late_acks_accepted,
            statistics_count=self.statistics_count,
            contracts=len({c.contract for c in self.claims if c.contract}),
            contracts_in_order=sum(1 for done in contracts.values()
                                   if len(done) == 3 and in_order(done)),
            vip_wait=vip, normal_wait=normal,
            cpus=os.cpu_count() or 0, load_average=round(os.getloadavg()[0], 2),
            events=[text for _, text in tracker.events])

    def _waits(self) -> tuple[Waits, Waits]:
        """Wait from the end of the claim's send to its first check, VIP and normal."""
        available: dict[int, float] = {}
        for batch in self.batches:
            for claim in self.claims[batch["first"]:batch["first"] + batch["count"]]:
                available[claim.number] = batch["after"]
        vip: list[float] = []
        normal: list[float] = []
        started = dict(self.tracker.started_at)
        for claim in self.claims:
            if claim.number in started and claim.number in available:
                wait = max(started[claim.number] - available[claim.number], 0.0)
                (vip if claim.vip else normal).append(wait)
        return Waits.of(vip), Waits.of(normal)


def _quiet_worker_logs() -> Callable[[], None]:
    """Keep the runtime's warnings (expected here: the demo provokes them) off the screen."""
    logger = logging.getLogger("hailq.worker")
    saved = logger.propagate, logger.level
    logger.propagate = False
    logger.setLevel(logging.CRITICAL)

    def restore() -> None:
        logger.propagate, _ = saved
        logger.setLevel(saved[1])

    return restore

