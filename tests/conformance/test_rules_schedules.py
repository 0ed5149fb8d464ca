"""SPEC rule 35: periodic schedules send each due slot exactly once while a scheduler runs.

Time-driven stories (new schedules, downtime, catch-up, daylight saving) run on SQLite
with an injected clock; the stories with several schedulers run on both backends in
real time, with threads and with real processes.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import threading
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

import hailq
from hailq import InvalidArgument, ScheduleNotFound
from hailq.runtime.scheduler import SCHEDULE_HEADER, SLOT_HEADER, Scheduler

from .helpers import advance, receive_all, wait_until

NY = ZoneInfo("America/New_York")


class Clock:
    """A clock the test moves."""

    def __init__(self, start: float) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


def at(*wall: int, tz: ZoneInfo = NY) -> float:
    return datetime(*wall, tzinfo=tz).timestamp()  # type: ignore[misc]


def slots_sent(queue: hailq.Queue) -> list[str]:
    """The slots of the messages ready now, which are acked."""
    found = receive_all(queue)
    queue.ack_many(found)
    return [m.headers[SLOT_HEADER] for m in found]


def local(iso: list[str], tz: ZoneInfo = NY) -> list[str]:
    return [datetime.fromisoformat(s).astimezone(tz).strftime("%m-%d %H:%M %Z") for s in iso]


@pytest.fixture
def clock() -> Clock:
    return Clock(at(2026, 3, 7, 12, 0))


@pytest.fixture
def timed(sqlite_url: str, clock: Clock) -> hailq.Broker:
    return hailq.connect(sqlite_url, clock=clock)


def test_rule_35_a_new_schedule_never_fires_slots_from_before_it_existed(
        timed: hailq.Broker, clock: Clock) -> None:
    timed.schedule("0 * * * *", queue="reports", body={"report": "hourly"}, name="hourly",
                   catch_up=100)
    scheduler = Scheduler(timed)

    assert scheduler.run_once() == 0  # 12:00 today was before it existed
    clock.now += 30 * 60
    assert scheduler.run_once() == 0
    clock.now += 30 * 60  # 13:00
    assert scheduler.run_once() == 1
    assert scheduler.run_once() == 0
    assert local(slots_sent(timed.get_queue("reports"))) == ["03-07 13:00 EST"]


def test_rule_35_after_downtime_the_latest_missed_slot_is_sent_once(
        timed: hailq.Broker, clock: Clock) -> None:
    timed.schedule("*/10 * * * *", queue="reports", body="tick", name="ten")
    Scheduler(timed).run_once()
    clock.now += 3 * 3600 + 5 * 60  # every scheduler was down for three hours

    assert Scheduler(timed).run_once() == 1
    assert local(slots_sent(timed.get_queue("reports"))) == ["03-07 15:00 EST"]


def test_rule_35_catch_up_sends_up_to_n_missed_slots_before_the_latest(
        timed: hailq.Broker, clock: Clock) -> None:
    timed.schedule(every=600, queue="reports", body="tick", name="ten", catch_up=3)
    Scheduler(timed).run_once()
    clock.now += 3 * 3600

    assert Scheduler(timed).run_once() == 4
    assert local(slots_sent(timed.get_queue("reports"))) == [
        "03-07 14:30 EST", "03-07 14:40 EST", "03-07 14:50 EST", "03-07 15:00 EST"]


def test_rule_35_cron_follows_its_time_zone_across_daylight_saving_as_cron_does(
        timed: hailq.Broker, clock: Clock) -> None:
    timed.schedule("30 2 * * *", queue="nightly", body="spring", name="spring",
                   timezone="America/New_York")
    timed.schedule("30 1 * * *", queue="nightly", body="autumn", name="autumn",
                   timezone="America/New_York")
    scheduler = Scheduler(timed)
    scheduler.run_once()
    sent: list[str] = []
    # Walk through both changes of 2026 a quarter of an hour at a time around them.
    for start, end in ((at(2026, 3, 7, 13), at(2026, 3, 9, 12)),
                       (at(2026, 10, 30, 12), at(2026, 11, 2, 12))):
        clock.now = start
        scheduler.run_once()
        while clock.now < end:
            clock.now += 900
            scheduler.run_once()
        nightly = receive_all(timed.get_queue("nightly"))
        timed.get_queue("nightly").ack_many(nightly)
        sent += [f"{m.body} {x}" for m in nightly for x in local([m.headers[SLOT_HEADER]])]
    assert sorted(s for s in sent if s.startswith("spring")) == [
        "spring 03-08 03:00 EDT",  # 02:30 does not exist that night: once, at the change
        "spring 03-09 02:30 EDT",
        "spring 10-30 02:30 EDT",  # after the months between the walks: the latest, once
        "spring 10-31 02:30 EDT",
        "spring 11-01 02:30 EST",
        "spring 11-02 02:30 EST",
    ]
    assert sorted(s for s in sent if s.startswith("autumn")) == [
        "autumn 03-08 01:30 EST",
        "autumn 03-09 01:30 EDT",
        "autumn 10-30 01:30 EDT",
        "autumn 10-31 01:30 EDT",
        "autumn 11-01 01:30 EDT",  # 01:30 happens twice that night: once, the first time
        "autumn 11-02 01:30 EST",
    ]


def test_rule_35_a_paused_schedule_sends_nothing_and_resumes_from_now(
        timed: hailq.Broker, clock: Clock) -> None:
    timed.schedule(every=60, queue="pings", body="ping", name="ping")
    scheduler = Scheduler(timed)
    scheduler.run_once()
    timed.pause_schedule("ping")
    clock.now += 600
    assert scheduler.run_once() == 0
    assert timed.get_schedule("ping").paused

    timed.resume_schedule("ping")
    assert scheduler.run_once() == 0  # the slots of the pause are skipped
    clock.now += 60
    assert scheduler.run_once() == 1
    timed.delete_schedule("ping")
    clock.now += 600
    assert scheduler.run_once() == 0
    with pytest.raises(ScheduleNotFound):
        timed.pause_schedule("ping")
    assert timed.schedules() == []


def test_rule_35_a_schedule_removed_from_the_code_stays_listed_but_is_not_sent(
        timed: hailq.Broker, clock: Clock) -> None:
    app = hailq.App()
    app.periodic(every=60, queue="pings", body="ping", name="ping")
    old_code = Scheduler(timed, app.periodics)
    old_code.run_once()
    clock.now += 60
    assert old_code.run_once() == 1

    new_code = Scheduler(timed, [])  # the declaration left the code; old workers stopped
    clock.now += 301
    found = timed.get_schedule("ping")
    assert not found.declared and found.next_slot is None
    assert new_code.run_once() == 0
    assert timed.get_schedule("ping").fired == 1

    # Declared again (a rollback): it goes on, the latest missed slot first.
    again = Scheduler(timed, app.periodics)
    assert again.run_once() == 1


def test_rule_35_redeclaring_changes_the_definition_and_keeps_the_last_slot(
        timed: hailq.Broker, clock: Clock) -> None:
    timed.schedule(every=60, queue="pings", body="one", name="ping")
    Scheduler(timed).run_once()
    clock.now += 60
    Scheduler(timed).run_once()
    last = timed.get_schedule("ping").last_slot
    changed = timed.schedule(every=120, queue="pings", body="two", name="ping")
    assert (changed.every, changed.body, changed.last_slot) == (120.0, "two", last)


def test_rule_35_bad_declarations_are_invalid_arguments_and_write_nothing(
        broker: hailq.Broker) -> None:
    app = hailq.App()
    for kwargs in ({"cron": "bad"}, {"cron": "* * * * *", "every": 60}, {},
                   {"every": 0}, {"every": 60, "timezone": "Mars/Olympus"},
                   {"every": 60, "catch_up": -1}, {"every": 60, "catch_up": True},
                   {"every": 60, "name": "\x00"}):
        with pytest.raises(InvalidArgument):
            app.periodic(queue="reports", body={}, **kwargs)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument):
            broker.schedule(queue="reports", body={}, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="queue"):
        broker.schedule(every=60, queue="bad name", body={})
    app.periodic(every=60, queue="reports", body={}, name="r")
    with pytest.raises(InvalidArgument, match="already has a schedule named 'r'"):
        app.periodic("* * * * *", queue="reports", body={}, name="r")
    assert broker.schedules() == [] and broker.queues() == []


def test_rule_35_several_schedulers_send_each_slot_exactly_once(
        broker: hailq.Broker, url: str) -> None:
    broker.schedule(every=1, queue="ticks", body="tick", name="tick")
    stop = threading.Event()

    def run() -> None:
        with hailq.connect(url) as own:
            scheduler = Scheduler(own, tick=0.01)
            while not stop.is_set():
                scheduler.run_once()

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    try:
        assert wait_until(lambda: broker.get_schedule("tick").fired >= 3, timeout=20)
    finally:
        stop.set()
        for t in threads:
            t.join()
    sent = slots_sent(broker.get_queue("ticks"))
    seconds = sorted(datetime.fromisoformat(s).timestamp() for s in sent)
    assert len(sent) >= 3
    assert seconds == [seconds[0] + i for i in range(len(seconds))]  # each once, none missed
    assert broker.get_schedule("tick").fired == len(sent)


def test_rule_35_scheduler_processes_send_each_slot_exactly_once_while_one_runs(
        broker: hailq.Broker, url: str, tmp_path: object) -> None:
    broker.schedule(every=1, queue="ticks", body="tick", name="tick")
    env = {**os.environ, "HAILQ_URL": url}
    command = [sys.executable, "-m", "hailq.cli.main", "scheduler", "--tick", "0.05"]
    procs = [subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) for _ in range(3)]
    try:
        assert wait_until(lambda: broker.get_schedule("tick").fired >= 2, timeout=20)
        procs[0].kill()  # one dies: the others go on
        procs[1].send_signal(signal.SIGTERM)
        assert procs[1].wait(10) == 0
        fired = broker.get_schedule("tick").fired
        assert wait_until(lambda: broker.get_schedule("tick").fired >= fired + 2, timeout=10)
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait(10)
    sent = slots_sent(broker.get_queue("ticks"))
    seconds = sorted(datetime.fromisoformat(s).timestamp() for s in sent)
    assert len(seconds) >= 4
    assert seconds == [seconds[0] + i for i in range(len(seconds))]


def test_rule_35_every_worker_runs_a_scheduler_for_its_apps_periodics(
        broker: hailq.Broker, url: str) -> None:
    app = hailq.App()
    done: list[object] = []
    app.add("ticks", lambda m: done.append(m.body))
    app.periodic(every=1, queue="ticks", body="tick", name="tick")
    workers = [hailq.Worker(hailq.connect(url), app, poll=0.1) for _ in range(2)]
    threads = [threading.Thread(target=w.run, kwargs={"handle_signals": False})
               for w in workers]
    for t in threads:
        t.start()
    try:
        assert wait_until(lambda: len(done) >= 2, timeout=15)
    finally:
        for w in workers:
            w.stop()
        for t in threads:
            t.join(15)
        for w in workers:
            w.broker.close()
    info = broker.get_schedule("tick")
    assert info.source == "app" and info.declared
    assert info.fired == len(done) + broker.get_queue("ticks").stats().ready

    quiet = hailq.Worker(broker, app, scheduler=False)
    assert quiet.scheduler is False


def test_rule_35_new_schedules_downtime_and_catch_up_on_the_database_clock(
        broker: hailq.Broker) -> None:
    """The injected-clock stories above, in real time on each backend's own clock."""
    broker.schedule(every=86400, queue="daily", body="d", name="daily", catch_up=100)
    assert Scheduler(broker).run_once() == 0  # today's midnight was before it existed

    broker.schedule(every=1, queue="ticks", body="t", name="latest")
    broker.schedule(every=1, queue="ticks", body="t", name="three", catch_up=2)
    Scheduler(broker).run_once()
    slot = {s.name: s.last_slot for s in broker.schedules()}
    slots_sent(broker.get_queue("ticks"))  # a second may have begun since: not the downtime's
    # every scheduler down: at least four slots go by (at once on SQLite's injected clock)
    advance(broker, max(0.0, math.ceil(slot["latest"] + 4) + 0.05 - broker.now()))
    assert Scheduler(broker).run_once() == 1 + 3  # the latest once; with catch_up=2, three
    sent: dict[str, list[float]] = {}
    for message in receive_all(broker.get_queue("ticks")):
        name = message.headers[SCHEDULE_HEADER]
        sent.setdefault(name, []).append(
            datetime.fromisoformat(message.headers[SLOT_HEADER]).timestamp())
    latest, three = sent["latest"], sorted(sent["three"])
    assert len(latest) == 1 and latest[0] >= slot["latest"] + 4
    assert three == [three[-1] - 2, three[-1] - 1, three[-1]] and three[-1] == latest[0]
    assert broker.get_queue("daily").stats().sent == 0


def test_remove_schedule_is_a_deprecated_name_of_delete_schedule(broker: hailq.Broker) -> None:
    broker.schedule(every=60, queue="pings", name="ping", body="ping")
    with pytest.warns(DeprecationWarning, match="delete_schedule"):
        broker.remove_schedule("ping")
    assert broker.schedules() == []
