"""SPEC rules 28 and 31 across a failover: the primary dies mid-storm, the standby takes over.

Each test makes a primary and a streaming standby of its own (``pgcluster.py``)
and runs real ``hailq worker`` processes and real producer processes
(``failover_producer.py``) on the libpq multi-host URL
``postgresql://127.0.0.1:P1,127.0.0.1:P2/hailq?target_session_attrs=read-write``.
Mid-storm the primary's processes are SIGKILLed together and the standby is
promoted (``pg_ctl promote``), as a failover manager would. Nobody restarts a
worker or a producer: they find the new primary by themselves.

- **synchronous** replication: every send that returned to its producer is
  delivered (lost 0), every effect, written through the inbox, happens exactly
  once, and an idle worker wakes for a new message within a second although its
  fallback poll is 10 s (LISTEN was re-established on the new primary). The
  time from the kill to the first message done on the new primary is a figure.
- **asynchronous** replication: sends acknowledged within the replication lag
  may be lost with the primary. The test counts them and checks that every lost
  one was acknowledged in the last moments before the kill.
- **a primary that stops answering without closing** (SIGSTOPped, slow): calls on
  it end at hailq's deadline, new connections at ``connect_timeout``, and the
  listening connection, which asks its server every 5 s, moves to the new
  primary; lost 0 all the same.
- **a promoted standby that still lists a synchronous standby** (rule 31): its
  commits wait for ever and ``statement_timeout`` cannot end that; hailq's own
  deadline fails the send with ``OutcomeUnknown``, and the retry with the same
  ``dedup_id`` stores the message once.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest

import hailq
from hailq.backends.postgres.deadline import with_defaults
from hailq.backends.postgres.listener import Listener

from .conftest import Figure, effect_store_for
from .ledger import EffectStore, Ledger, Report, check_queue
from .pgcluster import PgCluster, server_pids, start_cluster
from .pgserver import PgServer
from .workers import HERE, WorkerFleet, unfinished, worker_env

# A long scenario with servers of its own: CI runs it after make test (.ci/run's fault
# stage), make test-faults always.
pytestmark = pytest.mark.slow

SLOW_POLL = 10  # seconds: the workers' fallback poll; a faster wake-up is LISTEN's
QUEUE = "fo"
SCHEMA = "fo"


@contextlib.contextmanager
def cluster(*, sync: bool = True, clear_sync_on_standby: bool = True) -> Iterator[PgCluster]:
    # Not under pytest's tmp dir: that is private to root, and the servers run as postgres.
    made = start_cluster(Path(tempfile.mkdtemp(prefix="hailq-failover-")), sync=sync,
                         clear_sync_on_standby=clear_sync_on_standby)
    try:
        yield made
    finally:
        made.destroy()


@dataclass
class Run:
    """What one failover storm showed."""

    report: Report
    sent: int
    acked_at: dict[str, float]  # message id -> when its send returned to its producer
    killed_at: float
    promote_s: float
    first_done_s: float  # from the kill to the first effect committed on the new primary
    idle_wake_s: float
    producer_errors: list[str] = field(default_factory=list)
    figures: dict[str, object] = field(default_factory=dict)


def _effects_since(store: EffectStore, port: int | None, since: float) -> int:
    """Effects that began after ``since``, committed on the server at ``port`` only
    (the effects' server otherwise)."""
    target = store.url if port is None else f"postgresql://postgres@127.0.0.1:{port}/hailq"
    with psycopg.connect(target, autocommit=True, connect_timeout=2,
                         options=f"-c search_path={store.schema}") as conn:
        row = conn.execute("SELECT count(*) FROM effects WHERE at > %s", (since,)).fetchone()
    return int(row[0]) if row else 0


def _wait_effect(store: EffectStore, n: int, timeout: float = 60) -> float:
    """When message ``n``'s effect began (wall clock), waiting for it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(psycopg.OperationalError), store._conn() as conn:
            row = conn.execute("SELECT min(at) FROM effects WHERE n = %s", (n,)).fetchone()
            if row and row[0] is not None:
                return float(row[0])
        time.sleep(0.02)
    raise AssertionError(f"no effect of message {n} within {timeout} s")


def _send(q: hailq.Queue, ledger: Ledger, n: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            ledger.add([q.send({"n": n}, dedup_id=f"fo-{n}")], [n])
            return
        except hailq.StorageError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _drain(q: hailq.Queue, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(hailq.StorageError):
            if unfinished(q) == 0:
                return
        time.sleep(0.1)
    raise AssertionError(f"queue not drained within {timeout} s: {q.stats()}")


def _read_producer_logs(paths: list[Path], ledger: Ledger) -> tuple[dict[str, float], list[str]]:
    acked: dict[str, float] = {}
    errors: list[str] = []
    for path in paths:
        for line in path.read_text().splitlines():
            if line.startswith("! "):
                errors.append(line[2:])
                continue
            message_id, n, at = line.split()
            ledger.add([message_id], [int(n)])
            acked[message_id] = float(at)
    return acked, errors


def _acked_so_far(paths: list[Path]) -> int:
    total = 0
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            total += sum(1 for line in path.read_text().splitlines() if not line.startswith("!"))
    return total


def failover_storm(c: PgCluster, tmp_path: Path, *, messages: int, producers: int,
                   workers: int, kill_after: float = 0.4, freeze: bool = False,
                   store: EffectStore | None = None, **options: object) -> Run:
    """The storm: ``producers`` processes send ``messages`` in all while ``workers``
    processes consume them; once ``kill_after`` of them were acknowledged the primary is
    SIGKILLed (or, with ``freeze``, SIGSTOPped: it stops answering without closing a
    connection) and the standby promoted. Everything is then drained and checked.
    Effects go to ``store``, by default a schema of the same database (they fail over
    with it). ``options`` are hailq URL options (``timeout``)."""
    url = c.hailq_url(SCHEMA, poll_interval=SLOW_POLL, **options)
    in_cluster = store is None
    if store is None:
        store = effect_store_for(c.hailq_url(SCHEMA), tmp_path)
    ledger = Ledger()
    outs = [tmp_path / f"producer{i}.out" for i in range(producers)]
    procs: list[subprocess.Popen[bytes]] = []
    f: WorkerFleet | None = None
    with hailq.connect(url) as broker:
        q = broker.queue(QUEUE, lease=3, max_attempts=50,
                         retry={"base": 0.1, "max": 1.0, "jitter": 0})
        try:
            f = WorkerFleet(url, QUEUE, store, tmp_path, processes=workers, concurrency=4,
                            grace=5, extra=("--poll", str(SLOW_POLL)))
            _send(q, ledger, 0)
            _wait_effect(store, 0, 60)  # the workers are up

            per = messages // producers
            for i, out in enumerate(outs):
                log = (tmp_path / f"producer{i}.log").open("wb")
                procs.append(subprocess.Popen(
                    [sys.executable, str(HERE / "failover_producer.py"), url, QUEUE,
                     str(1 + i * per), str(per), str(out)],
                    env=worker_env(store), stdout=subprocess.DEVNULL, stderr=log))
            deadline = time.monotonic() + 180
            while _acked_so_far(outs) < messages * kill_after:
                assert time.monotonic() < deadline, "the producers are too slow"
                assert all(p.poll() is None for p in procs), "a producer exited early"
                time.sleep(0.05)

            acked_before_kill = _acked_so_far(outs)
            killed_at = c.freeze_primary() if freeze else c.kill_primary()
            promote_s = c.promote()
            deadline = time.monotonic() + 120
            while True:
                with contextlib.suppress(psycopg.OperationalError):
                    if _effects_since(store, c.standby.port if in_cluster else None,
                                      killed_at) > 0:
                        break
                assert time.monotonic() < deadline, "no message done on the new primary"
                time.sleep(0.02)
            first_done_s = time.time() - killed_at

            codes = [p.wait(240) for p in procs]
            assert codes == [0] * producers, (codes, f.log_tail())
            _drain(q, 180)

            # Everyone idles on an empty queue: only LISTEN wakes them within a second.
            # (A first send makes sure this process's own connections are fresh: the
            # wake-up measured is the workers'.)
            _send(q, ledger, 10**7 - 1)
            _wait_effect(store, 10**7 - 1, 60)
            time.sleep(2.0)
            sent_at = time.time()
            _send(q, ledger, 10**7)
            idle_wake_s = _wait_effect(store, 10**7, 60) - sent_at
            _drain(q, 60)  # its effect commits before its ack: let the ack land too

            alive = [p.poll() is None for p in f.procs]
            started = f.started
            tail = f.log_tail()
            acked, errors = _read_producer_logs(outs, ledger)
            report = check_queue(ledger, store, q)
            stats = q.stats()
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait(10)
            if f is not None:
                f.kill_all()
    assert alive == [True] * workers and started == workers, (
        f"a worker died or was restarted: {alive}, started {started}\n{tail}")
    acked_after_kill = sum(1 for at in acked.values() if at > killed_at)
    times = sorted(acked.values())
    # How long the producers, together, got no send through around the kill.
    sends_paused_s = max((b - a for a, b in itertools.pairwise(times)
                          if b > killed_at), default=0.0)
    # The kill came mid-storm: the producers went on sending to the new primary.
    assert acked_before_kill < messages and acked_after_kill > 0, (acked_before_kill,
                                                                 acked_after_kill)
    return Run(report=report, sent=len(ledger), acked_at=acked, killed_at=killed_at,
               promote_s=promote_s, first_done_s=first_done_s, idle_wake_s=idle_wake_s,
               producer_errors=errors,
               figures={"acked_before_kill": acked_before_kill,
                        "acked_after_kill": acked_after_kill,
                        "sends_paused_s": round(sends_paused_s, 3),
                        "promote_s": round(promote_s, 3),
                        "kill_to_first_done_s": round(first_done_s, 3),
                        "idle_wake_s": round(idle_wake_s, 3),
                        "producer_errors": len(errors), "redelivered": stats.redelivered,
                        **report.summary()})


def _check_sync_run(run: Run, errors_expected: bool = False) -> None:
    assert not run.report.lost, f"acknowledged sends lost: {run.report}"
    assert run.report.ok, str(run.report)
    assert run.report.effects == run.sent  # exactly once through the inbox
    # Every error the producers saw was a StorageError naming the cause; they retried it.
    assert all(e.split()[0] in ("StorageError", "OutcomeUnknown") for e in run.producer_errors)
    assert run.idle_wake_s < 1.5, (
        f"idle worker woke after {run.idle_wake_s:.2f} s: LISTEN not re-established")
    if run.promote_s < 4 and not errors_expected:
        # A new primary within the calls' retry window (8 s): the producers' sends waited
        # for it and none failed (a caller waiting on the pool asks it again and again).
        assert not run.producer_errors, run.producer_errors[:3]


def test_rule_31_failover_to_a_synchronous_standby_loses_no_acknowledged_send(
        tmp_path: Path, figure: Figure) -> None:
    with cluster(sync=True) as c:
        run = failover_storm(c, tmp_path, messages=2000, producers=2, workers=3)
    figure(replication="sync", messages=2000, producers=2, workers=3, **run.figures)
    _check_sync_run(run)


@pytest.mark.slow
@pytest.mark.matrix  # CI keeps the 2,000-message storm above as its failover run
def test_rule_31_failover_storm_6000_messages_to_a_synchronous_standby(
        tmp_path: Path, figure: Figure) -> None:
    with cluster(sync=True) as c:
        run = failover_storm(c, tmp_path, messages=6000, producers=3, workers=4, kill_after=0.5)
    figure(replication="sync", messages=6000, producers=3, workers=4, **run.figures)
    _check_sync_run(run)


FROZEN_TIMEOUT = 8  # seconds: the URL's timeout option in the frozen-primary storm


@pytest.mark.slow
def test_rule_31_failover_from_a_primary_that_stops_answering_without_closing(
        pg_url: str, tmp_path: Path, figure: Figure) -> None:
    # The frozen primary keeps every connection open and its kernel accepts new ones:
    # hailq's calls on it end at its deadline, new connections at connect_timeout (5 s
    # per host), then libpq takes the promoted standby. The handlers' effects go to
    # another server (the suite's shared one): a statement of the application's own on
    # the frozen server would wait as long as the application lets it.
    store = effect_store_for(pg_url, tmp_path)
    try:
        with cluster(sync=True) as c:
            run = failover_storm(c, tmp_path, messages=2000, producers=2, workers=3,
                                 freeze=True, store=store, timeout=FROZEN_TIMEOUT)
    finally:
        store.drop()
    figure(replication="sync", fault="SIGSTOP", timeout=FROZEN_TIMEOUT, **run.figures)
    _check_sync_run(run, errors_expected=True)
    assert all("OutcomeUnknown" in e or "StorageError" in e for e in run.producer_errors)


LAG_WINDOW = 1.0  # seconds before the kill within which an acknowledged send may be lost


@pytest.mark.slow
def test_rule_31_failover_to_an_asynchronous_standby_loses_only_the_last_acknowledged_sends(
        tmp_path: Path, figure: Figure) -> None:
    with cluster(sync=False) as c:
        run = failover_storm(c, tmp_path, messages=4000, producers=3, workers=3)
    lost_ages = sorted(run.killed_at - run.acked_at[i] for i in run.report.lost)
    figure(replication="async", messages=4000, producers=3, workers=3,
           lost_oldest_ack_before_kill_s=round(lost_ages[-1], 4) if lost_ages else None,
           **run.figures)
    # What asynchronous replication may lose: sends acknowledged within the replication
    # lag, never older ones, and nothing else goes wrong.
    assert all(age < LAG_WINDOW for age in lost_ages), lost_ages
    report = run.report
    assert not (report.duplicated or report.unexpected or report.stuck or report.dead), report
    assert run.idle_wake_s < 1.5, run.idle_wake_s


TIMEOUT = 3  # seconds: the URL's timeout option
SLACK = 1.5  # seconds past it that a failing call may take to come back


def test_rule_31_a_promoted_standby_still_listing_its_synchronous_standby_fails_sends_in_time(
        figure: Figure) -> None:
    with cluster(sync=True, clear_sync_on_standby=False) as c, \
            hailq.connect(c.hailq_url(SCHEMA, timeout=TIMEOUT)) as broker:
        q = broker.queue("claims", lease=30)
        first = q.send({"claim": 0})
        c.kill_primary()
        c.promote()
        assert c.standby.psql("SHOW synchronous_standby_names", db="postgres") == [("*",)]

        # statement_timeout cannot end a commit that waits for a standby.
        stuck = psycopg.connect(f"postgresql://postgres@127.0.0.1:{c.standby.port}/hailq",
                                autocommit=True, options="-c statement_timeout=1000")
        waiting = threading.Thread(target=stuck.execute,
                                   args=("CREATE TABLE waits_for_ever (x int)",), daemon=True)
        waiting.start()
        waiting.join(3.0)
        assert waiting.is_alive(), "the commit ended although no standby confirmed it"

        t0 = time.monotonic()
        with pytest.raises(hailq.OutcomeUnknown) as caught:
            q.send({"claim": 1}, dedup_id="claim-1")
        took = time.monotonic() - t0
        text = str(caught.value)
        assert isinstance(caught.value, hailq.StorageError)
        assert took < TIMEOUT + SLACK, took
        assert f"no answer within {TIMEOUT} s" in text, text
        assert "may have been stored" in text and "same dedup_id" in text, text

        # The operator removes the standby it does not have: the waits end, and the
        # retry the error advised stores nothing twice.
        c.standby.psql("ALTER SYSTEM RESET synchronous_standby_names", db="postgres")
        c.standby.psql("SELECT pg_reload_conf()", db="postgres")
        waiting.join(30)
        assert not waiting.is_alive()
        stuck.close()
        again = q.send({"claim": 1}, dedup_id="claim-1")
        got = q.receive(max_messages=10)
        figure(send_error_after_s=round(took, 2), stored_after_retry=len(got))
    assert [m.id for m in got] == [first, again]
    assert [m.body for m in got] == [{"claim": 0}, {"claim": 1}]


def test_rule_28_the_listener_notices_a_server_that_stops_answering_without_closing(
        throwaway_pg: PgServer, figure: Figure) -> None:
    # A frozen server keeps the LISTEN connection open and its kernel answers TCP
    # keepalives: only a question the server must answer shows that it is gone, so that
    # after a failover LISTEN moves to the new primary instead of waiting on the old one.
    listener = Listener(with_defaults(throwaway_pg.url, 30), "hailq_frozen", answer_within=2)
    try:
        listener.state(("q",))  # starts it
        assert listener.connected.wait(30)
        pids = server_pids(throwaway_pg)
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        try:
            t0 = time.monotonic()
            deadline = t0 + 60
            while listener.connected.is_set():
                assert time.monotonic() < deadline, "the listener still trusts a frozen server"
                time.sleep(0.05)
            noticed_s = time.monotonic() - t0
        finally:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
        assert listener.connected.wait(60), "the listener did not come back"
    finally:
        listener.close()
    figure(frozen_server_noticed_after_s=round(noticed_s, 2))
