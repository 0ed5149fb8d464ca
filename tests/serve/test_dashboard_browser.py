"""The dashboard in a real headless Chromium (Debian's ``/usr/bin/chromium`` driven by
Playwright; no browser download), against a real server on each backend: charts that
move, a pause clicked that stops a real ``hailq worker`` process, dead letters
redriven by clicking, a read-only token without buttons, a payload shown as text."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import hailq
from hailq.internal import ops
from waiting import wait_for, wait_past

from .conftest import ADMIN, CHROMIUM, CLIENT, READ, Server

pytestmark = pytest.mark.slow

HAILQ = str(Path(sys.executable).with_name("hailq"))

APP = textwrap.dedent('''
    from hailq import App

    app = App()

    @app.handler("jobs")
    def work(message):
        with open("done.txt", "a") as out:
            out.write(f"{message.body}\\n")
''')


def chart_last(page: Any, chart: str) -> dict[str, float]:
    raw = page.get_attribute(f"#{chart}", "data-last")
    return json.loads(raw) if raw else {}


def test_overview_chart_moves_after_messages_are_sent(open_page: Callable[..., Any],
                                                      broker: hailq.Broker) -> None:
    q = broker.queue("orders")
    q.send_many(list(range(3)))
    page = open_page("/")
    # The chart's first point comes with the page's first refresh (a busy machine may
    # render the page before it).
    wait_for(lambda: chart_last(page, "chart-depth").get("ready") == 3, 30,
             "the depth chart's first point")
    line = page.get_attribute("#chart-depth polyline[data-series=ready]", "points")
    q.send_many(list(range(40)))
    wait_for(lambda: chart_last(page, "chart-depth").get("ready", 0) >= 43, 30,
             "the depth chart to show the new messages")
    assert page.get_attribute("#chart-depth polyline[data-series=ready]", "points") != line
    assert int(page.get_attribute("#chart-depth", "data-points")) >= 2
    assert page.locator('tr[data-queue="orders"] td.f-ready').inner_text() == "43"
    assert "live" in page.locator("#live").inner_text()
    # Auto-refresh stops while the tab is hidden.
    polls: list[str] = []
    page.on("request", lambda r: polls.append(r.url) if "overview.json" in r.url else None)
    page.evaluate("""() => {
        Object.defineProperty(document, 'visibilityState', {value: 'hidden', configurable: true});
        document.dispatchEvent(new Event('visibilitychange'));
    }""")
    assert "paused" in page.locator("#live").inner_text()
    polls.clear()
    page.wait_for_timeout(7_000)  # two refresh periods and more
    assert polls == []


def test_pause_by_click_stops_a_real_worker_then_resume(open_page: Callable[..., Any],
                                                        server: Server, broker: hailq.Broker,
                                                        url: str, tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(APP)
    q = broker.queue("jobs")
    done = tmp_path / "done.txt"

    def handled() -> list[str]:
        return done.read_text().split() if done.exists() else []

    env = {k: v for k, v in os.environ.items() if k not in ("HAILQ_URL", "PYTHONPATH")}
    log = (tmp_path / "worker.log").open("w")
    worker = subprocess.Popen([HAILQ, "worker", "app:app", "--url", url], cwd=tmp_path,
                              env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        q.send("before")
        wait_for(lambda: handled() == ["before"], 60, "the worker to handle a message")
        page = open_page("/queues/jobs")
        page.click("button[data-action=pause]")
        page.wait_for_selector(".badge.paused")
        assert q.stats().paused
        assert page.locator("button[data-action=resume]").count() == 1
        q.send_many(["p1", "p2", "p3"])
        time.sleep(4)  # a running worker obeys a pause within a second
        assert handled() == ["before"]
        assert q.stats().ready == 3
        page.click("button[data-action=resume]")
        page.wait_for_selector("button[data-action=pause]")
        assert not q.stats().paused
        wait_for(lambda: sorted(handled()) == ["before", "p1", "p2", "p3"], 60,
                 "the worker to handle the messages sent while paused")
        assert worker.poll() is None
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(30)
        log.close()


def test_redrive_dead_letters_by_clicking(open_page: Callable[..., Any], server: Server,
                                          broker: hailq.Broker) -> None:
    q = broker.queue("mail", max_attempts=1)
    q.send_many([{"to": i} for i in range(5)])
    for message in q.receive(max_messages=5, lease=30):
        message.nack(error="TimeoutError" if message.body["to"] < 3 else "ValueError",
                     delay=0)
    api = server.client(ADMIN)
    page = open_page("/queues/mail/dead")
    questions: list[str] = []

    def answer(dialog: Any) -> None:
        questions.append(dialog.message)
        dialog.accept()

    page.on("dialog", answer)
    # One row.
    first = page.locator("tr[data-id]").first
    first_id = first.get_attribute("data-id")
    first.locator("button[data-action=redrive-one]").click()
    wait_for(lambda: api.get("/api/queues/mail/dead").json()["count"] == 4, 30,
             "the dead letter to be redriven")
    found = api.get(f"/api/queues/mail/messages/{first_id}").json()
    assert found["state"] == "ready"
    # Everything a filter matches, after a confirmation that says how many.
    page.goto(f"{server.base}/queues/mail/dead?error=ValueError")
    page.wait_for_selector("#match-count")
    assert page.locator("#match-count").inner_text() == "2"
    page.click("button[data-action=redrive-matching]")
    wait_for(lambda: api.get("/api/queues/mail/dead").json()["count"] == 2, 30,
             "the matching dead letters to be redriven")
    assert any("Redrive 2 dead letters of mail matching error contains" in q for q in questions)
    left = api.get("/api/queues/mail/dead").json()["messages"]
    assert all("TimeoutError" in m["last_error"] for m in left)
    assert api.get("/api/queues/mail").json()["figures"]["ready"] == 3
    page.wait_for_selector("#toast:not([hidden])")
    # Purge: every dead letter, after a confirmation with the count.
    page.goto(f"{server.base}/queues/mail/dead")
    page.click("button[data-action=purge-dead]")
    wait_for(lambda: api.get("/api/queues/mail/dead").json()["count"] == 0, 30,
             "the dead letters to be purged")
    assert any(q.startswith("Delete every dead letter of mail (2)") for q in questions)
    assert api.get("/api/queues/mail").json()["figures"]["ready"] == 3


def test_read_only_token_sees_no_buttons(open_page: Callable[..., Any],
                                         broker: hailq.Broker) -> None:
    q = broker.queue("jobs", max_attempts=1)
    q.send_many([1, 2])
    q.receive()[0].nack(error="boom", delay=0)
    for path in ("/", "/queues/jobs", "/queues/jobs/dead"):
        page = open_page(path, token=READ)
        assert page.locator("span.role").text_content() == "read"
        assert page.locator("button[data-action]").count() == 0, path
        admin = open_page(path, token=ADMIN)
        assert admin.locator("button[data-action]").count() > 0, path


def test_a_script_payload_is_shown_as_text(open_page: Callable[..., Any],
                                           broker: hailq.Broker) -> None:
    q = broker.queue("evil", max_attempts=1)
    payload = '<img src=x onerror="window.__xss = 1"><script>window.__xss = 2</script>'
    q.send({"note": payload}, headers={"h": payload})
    q.send({"note": payload})
    q.receive()[0].nack(error=payload, delay=0)
    alerts: list[str] = []
    for path in ("/queues/evil", "/queues/evil/dead"):
        page = open_page(path)
        page.on("dialog", lambda d: (alerts.append(d.message), d.dismiss()))
        page.locator("details.body summary").first.click()
        page.wait_for_timeout(300)
        assert page.evaluate("window.__xss") is None, path
        assert page.locator("img[src=x]").count() == 0
        shown = page.locator("details.body pre").first.inner_text()
        assert "<img src=x onerror=" in shown and "<script>window.__xss = 2</script>" in shown
        if path.endswith("/dead"):  # the error of the attempt, as text too
            assert page.locator(".err").first.inner_text() == payload
    assert alerts == []
    # The toggle hides payloads: the server leaves them out of the page.
    page.click("#payloads")
    page.wait_for_selector("body[data-payloads=hidden]")
    assert page.locator("details.body").count() == 0  # no body, no headers
    assert page.locator(".err").first.inner_text() == payload  # errors stay
    page.click("#payloads")
    page.wait_for_selector("details.body")
    assert shutil.which("chromium") or os.path.exists(CHROMIUM)


def test_operator_actions_by_clicking(open_page: Callable[..., Any], server: Server,
                                      broker: hailq.Broker) -> None:
    """Override a setting, reset it, unsubscribe, delete a topic and a queue."""
    broker.queue("jobs", lease=30).send("x")
    broker.topic("events").subscribe("jobs")
    api = server.client(ADMIN)
    page = open_page("/queues/jobs")
    page.on("dialog", lambda d: d.accept())
    page.fill("#configure input[name=lease]", "90")
    page.click("#configure button[type=submit]")
    page.wait_for_selector("#settings tr.overridden")
    shown = api.get("/api/queues/jobs").json()
    assert shown["settings"]["lease"] == 90 and shown["overridden"] == ["lease"]
    page.click("button:has-text('Reset overrides')")
    wait_for(lambda: api.get("/api/queues/jobs").json()["overridden"] == [], 30,
             "the override to be cleared")
    topics = open_page("/topics")
    topics.on("dialog", lambda d: d.accept())
    topics.click("button:has-text('Unsubscribe')")
    wait_for(lambda: api.get("/api/topics").json()["topics"][0]["subscriptions"] == [], 30,
             "the subscription to go")
    topics.wait_for_selector("text=no subscriptions")
    topics.click("button:has-text('Delete')")
    wait_for(lambda: api.get("/api/topics").json()["topics"] == [], 30, "the topic to go")
    page.goto(f"{server.base}/queues/jobs")
    page.click("button:has-text('Delete queue')")
    page.wait_for_url(f"{server.base}/")
    assert api.get("/api/queues/jobs").status_code == 404


# -- a live view that is live (issue 33, point 5) ---------------------------------------

def classes(page: Any, selector: str) -> set[str]:
    return set((page.get_attribute(selector, "class") or "").split())


def stays(page: Any) -> None:
    """Mark the page: ``kept(page)`` is true only while no reload has happened since."""
    page.evaluate("() => { window.__kept = true; }")


def kept(page: Any) -> bool:
    return bool(page.evaluate("() => window.__kept === true"))


def test_a_breach_and_a_dead_letter_highlight_without_reload(
        open_page: Callable[..., Any], server: Server, broker: hailq.Broker) -> None:
    q = broker.queue("mail", slo={9: 0.5}, max_attempts=1)
    q.send("first", priority=9)
    past_target = broker.now() + 0.55
    overview = open_page("/")
    queue_page = open_page("/queues/mail")
    breaches = 'tr[data-queue="mail"] td.f-breaches'
    dead = 'tr[data-queue="mail"] td.f-dead'
    assert "warn" not in classes(overview, breaches)
    assert "bad" not in classes(overview, dead)
    assert queue_page.locator("#priorities td.warn, #live-tiles .tile.bad").count() == 0
    for page in (overview, queue_page):
        stays(page)
    # A priority-9 message that waited past its 0.5 s target, received and acked over
    # HTTP: a breach; and a message whose only attempt failed: a dead letter.
    wait_past(broker.now, past_target)
    api = server.client(CLIENT)
    [m] = api.post("/api/queues/mail/receive", json={}).json()["messages"]
    assert api.post("/api/queues/mail/ack", json={"receipts": [m["receipt"]]}).json()[
        "results"][0]["acked"]
    q.send("poison")
    [poison] = q.receive()
    poison.nack(error="boom")
    wait_for(lambda: "warn" in classes(overview, breaches), 30, "the breach to highlight")
    assert overview.locator(breaches).inner_text() == "1"
    assert "zero" not in classes(overview, breaches)
    wait_for(lambda: "bad" in classes(overview, dead), 30, "the dead letter to highlight")
    assert overview.locator(dead).inner_text() == "1"
    tile = overview.locator('[data-total="breaches_5m"]').locator("xpath=..")
    assert "warn" in (tile.get_attribute("class") or "")
    # The queue page: its tiles and its priorities table, values and highlights.
    queue_page.wait_for_selector("#priorities td.warn", timeout=30_000)
    row = queue_page.locator("#priorities tbody tr").first
    assert row.locator("td").first.inner_text() == "9"
    queue_page.wait_for_selector("#live-tiles .tile.bad", timeout=30_000)
    assert kept(overview) and kept(queue_page)
    # Highlights go when the cause does: the dead letter deleted.
    assert broker.get_queue("mail").purge(dead=True) == 1
    wait_for(lambda: "bad" not in classes(overview, dead), 30, "the dead highlight to go")
    assert "zero" in classes(overview, dead)
    queue_page.wait_for_selector("#live-tiles .tile.bad", state="detached", timeout=30_000)
    assert kept(overview) and kept(queue_page)


def test_the_workers_column_refreshes(open_page: Callable[..., Any],
                                      broker: hailq.Broker) -> None:
    broker.queue("jobs").send_many([1, 2])
    page = open_page("/")
    cell = 'tr[data-queue="jobs"] td.f-workers'
    assert page.get_attribute(cell, "data-workers") == "0"
    stays(page)
    ops(broker).save_worker(hailq.WorkerInfo(
        id="w-live-1", host="img-01", pid=101, queues=["jobs"], concurrency=4, in_flight=0,
        started_at=time.time(), last_seen=0.0, state="running"))
    wait_for(lambda: page.get_attribute(cell, "data-workers") == "1", 30,
             "the workers column to count the new worker")
    assert page.locator(cell).inner_text().startswith("1")
    assert page.locator('[data-total="workers"]').inner_text() == "1"
    ops(broker).save_worker(hailq.WorkerInfo(
        id="w-live-1", host="img-01", pid=101, queues=["jobs"], concurrency=4, in_flight=0,
        started_at=time.time(), last_seen=0.0, state="stopped"))
    wait_for(lambda: page.get_attribute(cell, "data-workers") == "0", 30,
             "the workers column to drop the stopped worker")
    assert kept(page)


def test_queues_named_like_object_properties_work(open_page: Callable[..., Any],
                                                  broker: hailq.Broker) -> None:
    names = ("constructor", "toString", "valueOf", "hasOwnProperty")
    for name in names:
        broker.queue(name).send(name)
    context_errors: list[str] = []
    page = open_page("/")
    page.on("pageerror", lambda e: context_errors.append(str(e)))
    page.reload()
    page.wait_for_selector("body[data-charts=ready]")
    assert chart_last(page, "chart-depth")["ready"] == 4
    assert "live" in page.locator("#live").inner_text()
    stays(page)
    broker.get_queue("constructor").send_many([1, 2])
    wait_for(lambda: page.locator('tr[data-queue="constructor"] td.f-ready').inner_text()
             == "3", 30, "the constructor queue's row to refresh")
    wait_for(lambda: chart_last(page, "chart-depth").get("ready") == 6, 30,
             "the chart to take the new messages")
    for name in names:
        spark = page.locator(f'tr[data-queue="{name}"] svg.sparkline polyline')
        assert spark.count() == 1, name
    assert kept(page)
    assert context_errors == []


def test_charts_keep_their_history_across_a_reload(open_page: Callable[..., Any],
                                                   server: Server,
                                                   broker: hailq.Broker) -> None:
    from hailq.runtime.levels import LevelsRecorder
    from waiting import clear_of_slot_end

    q = broker.queue("orders")
    q.send_many(list(range(5)))
    clear_of_slot_end()
    assert LevelsRecorder(broker).record()  # what any worker or hailq serve records
    page = open_page("/")
    page.wait_for_selector("body[data-charts=ready]")
    assert int(page.get_attribute("#chart-depth", "data-history")) == 1
    q.receive(max_messages=5, lease=300)
    wait_for(lambda: chart_last(page, "chart-depth").get("in_flight") == 5, 30,
             "a live point with the messages in flight")
    page.reload()
    page.wait_for_selector("body[data-charts=ready]")
    # The recorded slot came back from the database, and the live point follows it.
    assert int(page.get_attribute("#chart-depth", "data-history")) == 1
    first = json.loads(page.get_attribute("#chart-depth", "data-first"))
    assert (first["ready"], first["in_flight"]) == (5, 0)
    assert chart_last(page, "chart-depth")["in_flight"] == 5
    assert int(page.get_attribute("#chart-depth", "data-points")) >= 2
    points = page.get_attribute("#chart-depth polyline[data-series=ready]", "points")
    assert len(points.split()) >= 2
    # A queue's page: its own series, from the same history.
    page.goto(f"{server.base}/queues/orders")
    page.wait_for_selector("body[data-charts=ready]")
    assert int(page.get_attribute("#chart-depth", "data-history")) == 1
    first = json.loads(page.get_attribute("#chart-depth", "data-first"))
    assert (first["ready"], first["in_flight"]) == (5, 0)
    assert chart_last(page, "chart-depth")["in_flight"] == 5
    stays(page)
    q.send_many(list(range(7)))
    wait_for(lambda: chart_last(page, "chart-depth").get("ready") == 7, 30,
             "the queue page's chart to take a live point")
    assert kept(page)


def test_schedules_page_pause_and_resume_by_clicking(open_page: Callable[..., Any],
                                                     broker: hailq.Broker) -> None:
    broker.schedule(every=60, queue="reports", body={"kind": "report"},
                    name="hourly <report>")
    page = open_page("/")
    page.click("nav a[href='/schedules']")
    page.wait_for_selector("#schedules")
    row = page.locator("#schedules tbody tr").first
    assert row.locator("td.name").inner_text() == "hourly <report>"
    assert row.locator("td.f-timing").inner_text().startswith("every 1m")
    assert row.locator("td.f-sent").inner_text() == "0"
    next_slot = row.locator("td.f-next").inner_text()
    assert next_slot.startswith("in ") or next_slot == "now", next_slot
    assert row.locator(".badge").inner_text() == "active"
    page.click("#schedules button:has-text('Pause')")
    page.wait_for_selector("#schedules .badge.paused")
    assert broker.get_schedule("hourly <report>").paused
    assert page.locator("#schedules td.f-next").inner_text() == "-"
    page.click("#schedules button:has-text('Resume')")
    page.wait_for_selector("#schedules .badge.ok")
    assert not broker.get_schedule("hourly <report>").paused
    reader = open_page("/schedules", token=READ)
    assert reader.locator("#schedules tbody tr").count() == 1
    assert reader.locator("button[data-action]").count() == 0


def test_the_favicon_loads(open_page: Callable[..., Any], server: Server) -> None:
    page = open_page("/")
    assert page.locator("link[rel=icon]").get_attribute("href") == "/favicon.ico"
    response = page.request.get(server.base + "/favicon.ico")
    assert response.status == 200
    assert response.headers["content-type"] == "image/x-icon"
    size = page.evaluate("""async () => {
        const img = new Image();
        img.src = "/favicon.ico";
        await img.decode();
        return [img.naturalWidth, img.naturalHeight];
    }""")
    assert size == [32, 32]
