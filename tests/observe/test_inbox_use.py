"""Rule 26's evidence: a worker counts the handler runs that used an inbox or settled in
``message.transaction()``, whatever the handler's kind (plain or ``async def``), and
only those; the count is stored with the figures every process reads."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import hailq
from hailq.runtime import App, Worker
from waiting import wait_until


def test_rule_26_workers_count_handler_runs_that_used_an_inbox(broker: hailq.Broker,
                                                               tmp_path: Path) -> None:
    effects = str(tmp_path / "effects.db")
    app = App()

    @app.handler("plain")
    def plain(message: hailq.Message) -> None:
        pass

    @app.handler("inbox")
    def with_inbox(message: hailq.Message) -> None:
        conn = sqlite3.connect(effects, timeout=30)
        try:
            with conn:
                hailq.inbox(conn, "doctor").record(message.id)
        finally:
            conn.close()

    @app.handler("async_inbox")
    async def async_inbox(message: hailq.Message) -> None:
        conn = sqlite3.connect(effects, timeout=30)
        try:
            hailq.inbox(conn, "doctor-async").seen(message.id)
        finally:
            conn.close()

    @app.handler("transaction")
    def in_transaction(message: hailq.Message) -> None:
        with message.transaction():
            pass

    for name in app.queues:
        broker.queue(name).send_many([{"n": i} for i in range(3)])
    worker = Worker(broker, app, concurrency=2, poll=0.1, scheduler=False)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        wait_until(lambda: all(
            sum(h.count for h in broker.get_queue(n).figures().handler.values()) >= 3
            for n in app.queues), 60, step=0.1)
    finally:
        worker.stop()
        thread.join(30)
    runs = {n: broker.get_queue(n).figures() for n in app.queues}
    assert {n: sum(h.count for h in f.handler.values()) for n, f in runs.items()} == \
        dict.fromkeys(app.queues, 3)
    assert {n: f.inbox_runs for n, f in runs.items()} == \
        {"plain": 0, "inbox": 3, "async_inbox": 3, "transaction": 3}
