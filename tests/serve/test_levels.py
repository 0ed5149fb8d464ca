"""Queue levels over time (the dashboard's charts' history), on SQLite and PostgreSQL:
recorded once per 10 s slot however many processes record, pruned after the hour,
skipped by a role that may only read, served as ``GET /api/levels``; and the API and
pages around them: schedules paused and resumed by name, the schedules page, the icon."""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest

import hailq
from hailq.backends.base import KEEP, SLOT, LevelsRecordParams
from hailq.errors import InvalidArgument
from hailq.runtime.levels import LevelsRecorder
from hailq.runtime.worker import Worker
from waiting import clear_of_slot_end, wait_until

from .conftest import ADMIN, CLIENT, READ, Server
from .test_security_cli import Serve


def execute(url: str, statement: str, args: tuple[object, ...] = ()) -> None:
    """A statement on hailq's levels table, written the way the table's owner would
    (``{levels}`` is the table's name in the backend of ``url``)."""
    if url.startswith("sqlite"):
        with sqlite3.connect(urlsplit(url).path) as conn:
            conn.execute(statement.format(levels="hailq_levels").replace("%s", "?"), args)
        return
    server, schema = url.rsplit("?schema=", 1)
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(statement.format(levels=f'"{schema}".levels'), args)  # type: ignore[arg-type]


def add_level(url: str, queue: str, at: float, ready: int, sent: int, acked: int) -> None:
    execute(url, "INSERT INTO {levels} (queue, slot, at, ready, in_flight, delayed, blocked, "
                 "dead, sent, acked, capped) VALUES (%s, %s, %s, %s, 0, 0, 0, 0, %s, %s, %s)",
            (queue, int(at // SLOT), at, ready, sent, acked, False))


# -- storage ---------------------------------------------------------------------------

def test_levels_count_like_stats_with_sent_and_acked(broker: hailq.Broker) -> None:
    q = broker.queue("jobs", max_attempts=1)
    q.send_many(list(range(6)))
    q.send("later", delay=3600)
    first, second, _held = q.receive(max_messages=3, lease=60)
    first.ack()
    second.nack(error="boom")  # its last attempt: dead
    clear_of_slot_end()
    assert LevelsRecorder(broker).record()
    [row] = broker.levels("jobs")
    assert (row.ready, row.in_flight, row.delayed, row.dead, row.blocked) == (3, 1, 1, 1, 0)
    assert (row.sent, row.acked, row.capped) == (7, 1, False)
    assert abs(row.at - broker.now()) < 5


def test_the_duty_comes_once_per_slot_of_the_storage() -> None:
    from hailq.runtime import levels as duty

    assert duty.SLOT == SLOT


def test_a_capped_count_reads_as_the_limit_and_leaves_acked_unknown(
        broker: hailq.Broker) -> None:
    broker.queue("jobs").send_many(list(range(5)))
    clear_of_slot_end()
    assert broker.backend.levels_record(LevelsRecordParams(limit=2))
    [row] = broker.levels()
    assert (row.ready, row.capped, row.acked, row.sent) == (2, True, None, 5)


def test_one_row_per_queue_and_slot_however_many_processes_record(url: str) -> None:
    """Eight brokers (each its own connections, as processes have) record at once: one
    of them writes the slot, the others find it taken or lose the insert."""
    owner = hailq.connect(url)
    for name in ("constructor", "toString", "jobs"):
        owner.queue(name).send(name)
    brokers = [hailq.connect(url) for _ in range(8)]
    wrote: list[bool] = []
    start = threading.Barrier(len(brokers))

    def record(b: hailq.Broker) -> None:
        start.wait()
        wrote.append(LevelsRecorder(b).record())

    clear_of_slot_end(4.0)
    threads = [threading.Thread(target=record, args=(b,)) for b in brokers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(wrote) == [False] * 7 + [True]
    rows = owner.levels()
    assert sorted(r.queue for r in rows) == ["constructor", "jobs", "toString"]
    assert not LevelsRecorder(owner).record()  # the slot is taken: nothing is counted
    assert len(owner.levels()) == 3
    for b in (*brokers, owner):
        b.close()


def test_levels_older_than_the_hour_are_pruned_by_the_next_write(
        url: str, broker: hailq.Broker) -> None:
    broker.queue("jobs").send(1)
    now = broker.now()
    add_level(url, "jobs", now - KEEP - 60, ready=9, sent=0, acked=0)
    add_level(url, "jobs", now - 3000, ready=4, sent=0, acked=0)
    clear_of_slot_end()
    with pytest.raises(InvalidArgument):
        broker.levels(seconds=KEEP + 1)
    assert LevelsRecorder(broker).record()
    assert [r.ready for r in broker.levels(seconds=KEEP)] == [4, 1]
    assert [r.ready for r in broker.levels(seconds=60)] == [1]


def test_a_worker_records_levels_as_it_runs(broker: hailq.Broker) -> None:
    broker.queue("jobs").send_many([1, 2, 3])
    worker = Worker(broker, {"nothing": lambda m: None}, concurrency=1)
    thread = threading.Thread(target=worker.run, kwargs={"handle_signals": False})
    thread.start()
    try:
        wait_until(lambda: broker.levels("jobs"), 30)
    finally:
        worker.stop()
        thread.join(30)
    [row] = broker.levels("jobs")
    assert row.ready == 3


def test_hailq_serve_records_levels(url: str, broker: hailq.Broker) -> None:
    broker.queue("jobs").send_many([1, 2])
    serve = Serve(url, "--token", "a-token-for-levels-0123")
    try:
        serve.wait_ready()
        wait_until(lambda: broker.levels(), 30)
    finally:
        serve.finish()
    [row] = broker.levels()
    assert (row.queue, row.ready, row.sent) == ("jobs", 2, 2)


def test_a_role_that_may_only_read_skips_recording_and_sees_what_was_recorded(
        pg_url: str, reader_url: str, caplog: pytest.LogCaptureFixture) -> None:
    with hailq.connect(pg_url) as owner:
        owner.queue("jobs").send_many([1, 2])
        clear_of_slot_end()
        assert LevelsRecorder(owner).record()
    add_level(pg_url, "jobs", time.time() - 600, ready=7, sent=0, acked=0)
    caplog.set_level(logging.WARNING, "hailq.levels")
    with hailq.connect(reader_url, migrate=False) as reader:
        recorder = LevelsRecorder(reader)
        # The slot is taken: the reader counts nothing and writes nothing.
        assert not recorder.record()
        # The next slot, its turn to write, without waiting up to a slot for it: the
        # owner's row moves back a slot, which leaves the current one free.
        execute(pg_url, "UPDATE {levels} SET slot = slot - 1 "
                        "WHERE slot = (SELECT max(slot) FROM {levels})")
        assert not recorder.record()
        assert not recorder.record()
        assert [r.ready for r in reader.levels("jobs")] == [7, 2]
    warnings = [r for r in caplog.records if r.name == "hailq.levels"]
    assert len(warnings) == 1 and "permission denied" in warnings[0].getMessage()


# -- the API ---------------------------------------------------------------------------

def test_api_levels_serves_totals_rates_and_one_queue(server: Server, url: str,
                                                      broker: hailq.Broker) -> None:
    broker.queue("jobs")
    broker.queue("constructor")
    now = broker.now()
    for queue, extra in (("jobs", 0), ("constructor", 10)):
        # 20 s apart: a 20 s window leaves out the first whatever the slot phase.
        add_level(url, queue, now - 35, ready=4, sent=100 + extra, acked=50)
        add_level(url, queue, now - 15, ready=6, sent=300 + extra, acked=100)
    api = server.client(READ)
    doc = api.get("/api/levels").json()
    assert doc["slot_seconds"] == SLOT and doc["seconds"] == 3600
    t = doc["totals"]
    assert t["ready"] == [8, 12]
    assert t["sent_per_second"][0] is None
    assert t["sent_per_second"][1] == pytest.approx(20.0)
    assert t["acked_per_second"][1] == pytest.approx(5.0)
    assert sorted(q["name"] for q in doc["queues"]) == ["constructor", "jobs"]
    assert set(doc["queues"][0]) == {"name", "at", "ready"}
    one = api.get("/api/levels", params={"queue": "jobs", "seconds": "60"}).json()
    [jobs] = one["queues"]
    assert jobs["ready"] == [4, 6] and jobs["sent_per_second"][1] == pytest.approx(10.0)
    assert one["totals"]["ready"] == [4, 6]
    assert api.get("/api/levels", params={"seconds": "20"}).json()["totals"]["ready"] == [12]


@pytest.mark.parametrize("query", [{"seconds": "0"}, {"seconds": "3901"}, {"seconds": "1.5"},
                                   {"seconds": "\u00b2"}, {"seconds": "9" * 400},
                                   {"queue": "-bad"}])
def test_api_levels_refuses_bad_parameters(server: Server, query: dict[str, str]) -> None:
    r = server.client(READ).get("/api/levels", params=query)
    assert r.status_code == 400, r.text


def test_api_levels_of_an_unknown_queue_is_404_and_clients_may_not_look(
        server: Server) -> None:
    assert server.client(READ).get("/api/levels", params={"queue": "nope"}).status_code == 404
    assert server.client(CLIENT).get("/api/levels").status_code == 403
    assert server.client(None).get("/api/levels").status_code == 401


def test_schedules_pause_and_resume_by_name_for_admins_only(server: Server,
                                                           broker: hailq.Broker) -> None:
    name = "nightly report / eu"  # spaces and a slash: the name travels in the body
    broker.schedule(every=60, queue="reports", body={"kind": "report"}, name=name)
    admin, reader = server.client(ADMIN), server.client(READ)
    assert reader.post("/api/schedules/pause", json={"name": name}).status_code == 403
    assert not broker.get_schedule(name).paused
    r = admin.post("/api/schedules/pause", json={"name": name})
    assert (r.status_code, r.json()) == (200, {"name": name, "paused": True})
    assert broker.get_schedule(name).paused
    assert broker.get_schedule(name).next_slot is None
    r = admin.post("/api/schedules/resume", json={"name": name})
    assert (r.status_code, r.json()) == (200, {"name": name, "paused": False})
    assert not broker.get_schedule(name).paused
    assert admin.post("/api/schedules/pause", json={"name": "nope"}).status_code == 404
    # A name no schedule can have (a NUL no database holds): not found, nothing asked.
    assert admin.post("/api/schedules/pause", json={"name": "nightly\x00"}).status_code == 404
    for bad in ({}, {"name": ""}, {"name": 5}, {"name": name, "other": 1}):
        assert admin.post("/api/schedules/pause", json=bad).status_code == 400, bad
    assert not broker.get_schedule(name).paused


def test_schedules_page_shows_timing_slots_and_buttons_for_admins(
        server: Server, broker: hailq.Broker) -> None:
    broker.schedule(every=300, queue="reports", body=1, name="five")
    broker.schedule("0 3 * * *", queue="reports", body=2, name="nightly",
                    timezone="Europe/Paris")
    broker.pause_schedule("nightly")
    page = server.client(ADMIN).get("/schedules").text
    assert "every 5m" in page and "cron 0 3 * * * (Europe/Paris)" in page
    assert page.count('data-path="/api/schedules/pause"') == 1
    assert page.count('data-path="/api/schedules/resume"') == 1
    assert 'href="/schedules"' in page
    shown = server.client(READ).get("/schedules").text
    assert "five" in shown and "data-action" not in shown


def test_favicon_is_served(server: Server) -> None:
    r = server.client(READ).get("/favicon.ico")
    assert r.status_code == 200
    assert r.headers["content-type"] == "image/x-icon"
    assert r.content[:4] == b"\x00\x00\x01\x00"  # an ICO file's header
    assert b'rel="icon" href="/favicon.ico"' in server.client(READ).get("/").content


def test_static_files_are_where_the_pages_say(server: Server) -> None:
    here = Path(__file__).resolve().parents[2] / "src" / "hailq" / "serve" / "static"
    for name in ("dashboard.js", "overview.js", "dashboard.css", "favicon.ico"):
        assert (here / name).exists(), name
    assert server.client(READ).get("/static/overview.js").status_code == 200
