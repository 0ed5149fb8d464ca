"""``hailq bench --only overview``: how fast the dashboard's overview answers with 100
queues holding 10,000 messages each (a million in all), on SQLite and PostgreSQL.

The messages are written by one ``INSERT ... SELECT`` per database (a recursive CTE on
SQLite, ``generate_series`` on PostgreSQL) straight into hailq's tables: a bench-only
path, since sending a million messages one API call at a time would take minutes and
measure the sends, not the overview. Only scratch targets are filled: a fresh SQLite
file in a temporary directory, or a PostgreSQL schema ``hailq bench`` created and marked
(``hailq/bench/scratch.py``). Each queue gets ready messages, delayed ones, leased ones,
dead letters with an error, and a few priorities; the counters say what was sent.

The figures are medians over several requests of ``GET /`` (the page) and
``GET /overview.json`` (what the page polls) through a real HTTP server on loopback.
"""

from __future__ import annotations

import sqlite3
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import hailq
from hailq.bench.runner import Figure
from hailq.bench.scratch import schema_of
from hailq.url import parse_url

QUEUES = 100
PER_QUEUE = 10_000

# One row per message: i runs over 1..QUEUES*PER_QUEUE; queue (i-1) % QUEUES gets it as
# its message j = (i-1) / QUEUES. Of each queue's messages 1 in 50 is dead (with an error),
# 1 in 50 leased until far ahead, 1 in 25 delayed, the rest ready; priorities 0-9.
_SQLITE_FILL = """
WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < :n),
m AS (SELECT i, (i - 1) % :queues AS q, (i - 1) / :queues AS j FROM c)
INSERT INTO hailq_messages (id, queue, state, body, body_kind, headers, priority,
                            ordering_key, sort_key, attempt, enqueued_at, available_at,
                            lease_until, token, errors, dead_at)
SELECT '0BENCH' || printf('%020d', i), printf('bench-%03d', q),
       CASE WHEN j % 50 = 1 THEN 'dead' WHEN j % 50 = 2 THEN 'leased'
            WHEN j % 25 = 3 THEN 'scheduled' ELSE 'ready' END,
       CAST('{"order":' || i || ',"customer":"c-' || (i % 977) || '"}' AS BLOB), 0, NULL,
       j % 10, NULL, -(j % 10), CASE WHEN j % 50 IN (1, 2) THEN 1 ELSE 0 END,
       :now - 3600 + i * 0.001, :now + CASE WHEN j % 25 = 3 THEN 3600 ELSE -3600 END,
       CASE WHEN j % 50 = 2 THEN :now + 86400 END,
       CASE WHEN j % 50 = 2 THEN '0123456789abcdef' END,
       CASE WHEN j % 50 = 1 THEN json_array(json_object(
           'attempt', 1, 'error', 'ValueError: order ' || i || ' has no customer',
           'at', :now - 60)) END,
       CASE WHEN j % 50 = 1 THEN :now - 60 END
FROM m
"""

_PG_FILL = """
INSERT INTO {schema}.messages (id, queue, state, body, body_kind, headers, priority,
                               ordering_key, sort_key, attempt, enqueued_at, available_at,
                               lease_until, token, errors, dead_at)
SELECT '0BENCH' || lpad(i::text, 20, '0'), 'bench-' || lpad(q::text, 3, '0'),
       CASE WHEN j %% 50 = 1 THEN 'dead' WHEN j %% 50 = 2 THEN 'leased'
            WHEN j %% 25 = 3 THEN 'scheduled' ELSE 'ready' END,
       convert_to('{"order":' || i || ',"customer":"c-' || (i %% 977) || '"}', 'UTF8'), 0,
       NULL, j %% 10, NULL, -(j %% 10), CASE WHEN j %% 50 IN (1, 2) THEN 1 ELSE 0 END,
       %(now)s - 3600 + i * 0.001, %(now)s + CASE WHEN j %% 25 = 3 THEN 3600 ELSE -3600 END,
       CASE WHEN j %% 50 = 2 THEN %(now)s + 86400 END,
       CASE WHEN j %% 50 = 2 THEN '0123456789abcdef' END,
       CASE WHEN j %% 50 = 1 THEN jsonb_build_array(jsonb_build_object(
           'attempt', 1, 'error', 'ValueError: order ' || i || ' has no customer',
           'at', %(now)s - 60)) END,
       CASE WHEN j %% 50 = 1 THEN %(now)s - 60 END
FROM (SELECT i, (i - 1) %% %(queues)s AS q, (i - 1) / %(queues)s AS j
      FROM generate_series(1, %(n)s) AS i) AS m
"""


def fill(url: str, queues: int = QUEUES, per_queue: int = PER_QUEUE) -> None:
    """Declare ``queues`` queues and write ``per_queue`` messages into each of a scratch
    database (a fresh SQLite file, or a marked benchmark schema: see the module)."""
    broker = hailq.connect(url)
    try:
        names = [f"bench-{i:03d}" for i in range(queues)]
        for name in names:
            broker.queue(name, slo={9: 10.0, 0: 300.0})
        now = broker.now()
    finally:
        broker.close()
    n = queues * per_queue
    parsed = parse_url(url)
    if parsed.scheme == "sqlite":
        conn = sqlite3.connect(parsed.target)
        try:
            with conn:
                conn.execute(_SQLITE_FILL, {"n": n, "queues": queues, "now": now})
                conn.executemany("INSERT INTO hailq_counters (queue, sent) VALUES (?, ?) "
                                 "ON CONFLICT (queue) DO UPDATE SET sent = excluded.sent",
                                 [(q, per_queue) for q in names])
            conn.execute("ANALYZE")
        finally:
            conn.close()
        return
    import psycopg

    schema = schema_of(url)
    with psycopg.connect(parsed.target, autocommit=True) as pg:
        with pg.transaction():
            pg.execute(_PG_FILL.replace("{schema}", f'"{schema}"'),
                       {"n": n, "queues": queues, "now": now})
            pg.cursor().executemany(
                f'INSERT INTO "{schema}".counters (queue, shard, sent) VALUES (%s, 0, %s) '
                "ON CONFLICT (queue, shard) DO UPDATE SET sent = excluded.sent",
                [(q, per_queue) for q in names])
        pg.execute(f'VACUUM ANALYZE "{schema}".messages')


def median_ms(work: Callable[[], Any], runs: int) -> float:
    """The median of ``runs`` timings of ``work`` after one warm-up, in milliseconds."""
    work()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        work()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


@contextmanager
def serving(url: str) -> Iterator[tuple[str, str]]:
    """A real ``hailq serve`` app on a free loopback port in this process: yields its
    base URL and an admin token."""
    import socket

    import uvicorn

    from hailq.serve.app import create_app
    from hailq.serve.security import Tokens

    token = "bench-" + "0" * 32
    broker = hailq.connect(url)
    app = create_app(broker, tokens=Tokens(admin=(token,)))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.02)
        yield f"http://127.0.0.1:{port}", token
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
        broker.close()


def bench_overview(url: str, runs: int, say: Callable[[str], None]) -> list[Figure]:
    """Fill ``url`` (a scratch target) and time the overview page and its JSON, beside
    the baseline of reading every queue's figures one queue at a time (what a page would
    cost without ``Broker.overview``), measured in the same run."""
    import httpx

    say(f"overview: filling {QUEUES} queues x {PER_QUEUE:,} messages")
    fill(url)
    say("overview: timing GET / and GET /overview.json")
    turns = max(runs, 5)
    with serving(url) as (base, token), httpx.Client(
            base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=120) as client:
        def get(path: str) -> Callable[[], None]:
            def one() -> None:
                client.get(path).raise_for_status()
            return one

        page = median_ms(get("/"), turns)
        data = median_ms(get("/overview.json"), turns)
    broker = hailq.connect(url)
    try:
        one_by_one = median_ms(lambda: [q.figures() for q in broker.queues()], turns)
    finally:
        broker.close()
    name = f"{QUEUES} queues x {PER_QUEUE:,} messages"
    return [Figure(f"overview page, {name}", "ms", page, one_by_one),
            Figure(f"overview JSON, {name}", "ms", data, one_by_one)]
