"""Screenshots of the dashboard for the docs: ``python scripts/screenshots.py [OUT_DIR]``.

Fills a demo database (a fresh SQLite file in a temporary directory) with a few queues
an operator would recognise: orders with priorities and a service level, a paused
results queue, an email queue with dead letters of several errors, a topic with
subscriptions and two workers' heartbeats. Handler runs go through the workers' own
figure recorder, so rates and per-priority waits are real figures. Then it serves the
dashboard on loopback and takes PNGs of the overview, a queue page, the dead letters and
the schedules with Playwright driving Debian's chromium (``/usr/bin/chromium``; no
browser download).

Writes ``overview.png``, ``queue.png``, ``dead-letters.png`` and ``schedules.png`` into
OUT_DIR (default ``docs/images``).
"""

from __future__ import annotations

import random
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

import uvicorn

import hailq
from hailq.models import WorkerInfo
from hailq.observe.recorder import FigureRecorder
from hailq.serve import Tokens, create_app

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
TOKEN = "screenshots-admin-token"
ERRORS = ["TimeoutError: smtp.example.net:587 did not answer within 30 s",
          "SMTPRecipientRefused: 550 5.1.1 mailbox unavailable",
          "ValueError: template 'invoice-v2' has no field 'due_date'"]


def demo(broker: hailq.Broker) -> None:
    """A small, lively installation."""
    rnd = random.Random(7)
    orders = broker.queue("orders", slo={9: 5.0, 5: 30.0, 0: 300.0}, lease=60)
    orders.configure(max_attempts=8)  # an operator's override, shown as such
    results = broker.queue("results", max_in_flight=20)
    email = broker.queue("email", max_attempts=3, retry={"base": 0.0, "factor": 1.0, "max": 0.0})
    thumbs = broker.queue("thumbnails", aging=60)
    broker.queue("webhooks")
    audit = broker.queue("audit-log")
    topic = broker.topic("order-events")
    topic.subscribe("audit-log")
    topic.subscribe("webhooks", {"kind": ["paid", "refunded"]})
    broker.topic("inventory")

    recorder = FigureRecorder(broker, ["orders", "results", "email", "thumbnails"],
                              lambda q: broker.get_queue(q).settings.slo, interval=3600)
    recorder.start()
    for i in range(1200):
        orders.send({"order": 40_000 + i, "customer": f"c-{rnd.randrange(9000)}",
                     "total": round(rnd.uniform(5, 900), 2)}, priority=rnd.choice([0, 0, 5, 9]))
    for msg in orders.receive(max_messages=100, lease=120)[:100]:
        wait = rnd.uniform(0.2, 3.0) if msg.priority == 9 else rnd.uniform(1.0, 60.0)
        recorder.observe("orders", msg.priority, wait, rnd.uniform(0.02, 0.4), True)
        msg.ack()
    for _ in range(3):  # a few held right now
        orders.receive(max_messages=4, lease=600)
    for i in range(420):
        results.send({"job": i, "rows": rnd.randrange(1, 5000)})
    results.pause()
    for i in range(60):
        thumbs.send({"image": f"s3://media/{i:05d}.jpg", "sizes": [64, 256]},
                    priority=rnd.randrange(0, 3))
    for i in range(16):
        email.send({"to": f"user{i}@example.com", "template": "invoice-v2",
                    "note": "<script>alert('not run')</script>"},
                   headers={"tenant": "acme"})
    for _ in range(3):  # every attempt fails: they go dead after the third
        for msg in email.receive(max_messages=16, lease=30):
            msg.nack(error=ERRORS[msg.body["to"].count("1") % len(ERRORS)], delay=0)
    for i in range(25):
        email.send({"to": f"next{i}@example.com", "template": "welcome"})
        audit.send({"event": "login", "user": i})
    for q, n in (("orders", 300), ("thumbnails", 40), ("email", 10)):
        for _ in range(n):
            recorder.observe(q, 0, rnd.uniform(0.5, 20), rnd.uniform(0.05, 1.5), True)
    recorder.close()
    heartbeat(broker)
    broker.schedule("0 6 * * 1-5", queue="email", body={"template": "digest"},
                    name="weekday digest", timezone="Europe/Paris")
    broker.schedule(every=300, queue="audit-log", body={"event": "rollup"}, name="rollup")
    broker.schedule(every=3600, queue="results", body={"job": "export"}, name="hourly export")
    broker.pause_schedule("hourly export")


def heartbeat(broker: hailq.Broker) -> None:
    """Two workers report, as running ones do every second or so."""
    now = broker.now()
    for n, queues in enumerate((["orders", "thumbnails"], ["email", "results"])):
        broker.save_worker(WorkerInfo(f"worker-{n + 1}", "app-1", 4100 + n, queues, 8, 3 - n,
                                      now - 3600, now, "running"))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def shoot(url: str, out: Path) -> None:
    from playwright.sync_api import sync_playwright

    broker = hailq.connect(url)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(broker, tokens=Tokens((TOKEN,))),
                                           port=port, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    base = f"http://127.0.0.1:{port}"
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1440, "height": 720},
                                    device_scale_factor=1)
            page.goto(f"{base}/login?token={TOKEN}")
            orders = broker.get_queue("orders")
            for i in range(6):  # some history for the charts
                orders.send_many([{"order": 90_000 + i * 50 + k} for k in range(40 + 25 * i)])
                heartbeat(broker)
                page.wait_for_timeout(3200)
            page.screenshot(path=str(out / "overview.png"))
            heartbeat(broker)
            page.goto(f"{base}/queues/orders")
            for i in range(4):  # a few refreshes of the queue's own charts
                orders.send_many([{"order": 95_000 + i * 50 + k} for k in range(30 + 20 * i)])
                orders.receive(max_messages=10 + 5 * i, lease=600)
                page.wait_for_timeout(3200)
            page.screenshot(path=str(out / "queue.png"), full_page=False)
            page.goto(f"{base}/queues/email/dead?error=TimeoutError")
            page.screenshot(path=str(out / "dead-letters.png"), full_page=False)
            page.goto(f"{base}/schedules")
            page.set_viewport_size({"width": 1440, "height": 360})
            page.screenshot(path=str(out / "schedules.png"), full_page=False)
            browser.close()
    finally:
        server.should_exit = True
        thread.join(10)
        broker.close()


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/images")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="hailq-screens-") as tmp:
        url = f"sqlite:///{Path(tmp) / 'demo.db'}"
        with hailq.connect(url) as broker:
            demo(broker)
        shoot(url, out)
    print(f"wrote overview.png, queue.png, dead-letters.png, schedules.png to {out}")


if __name__ == "__main__":
    main()
