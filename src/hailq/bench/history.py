"""``hailq bench --only history``: what keeping history costs, and how fast it is found
(rule 40).

The drain: one consumer process drains the same backlog through the API (``receive``
then ack), once with the queue's ``retain`` on (an operator's override, as
``hailq configure --retain`` sets it: every ack writes a history row) and once with it
off, alternating which goes first within each run so that a neighbour's load falls on
both alike. The ratio is on ÷ off (the goal: at least 0.75), per wall-clock second and
per second of the process's CPU time. History rows of the
previous turn are deleted between turns, so each drain starts alike.

The search: history is filled with 1,000,000 finished messages in bulk statements
(over 100,000 ordering keys, each with a dedup id and a header), then messages are
looked up through ``broker.history`` by id, by dedup id and by ordering key: the
median and slowest of 50 lookups each, in milliseconds (the goal: under 50 ms).
"""

from __future__ import annotations

import multiprocessing as mp
import random
import statistics
import time
from typing import Any

import hailq
from hailq.bench.figures import pair
from hailq.bench.runner import QUEUE, Figure, _refill, reset_hailq, take_until_empty
from hailq.bench.scratch import schema_of

SEARCH_ROWS = 1_000_000
SEARCH_KEYS = 100_000
LOOKUPS = 50
FILL_CHUNK = 50_000


def _drain(url: str, batch: int, out: Any) -> None:
    queue = hailq.connect(url).queue(QUEUE, lease=60)
    start, cpu = time.perf_counter(), time.process_time()
    done = take_until_empty(lambda: queue.receive(batch),
                            (lambda got: got[0].ack()) if batch == 1 else queue.ack_many)
    out.put((done / (time.perf_counter() - start), done / (time.process_time() - cpu)))


def _one(url: str, batch: int) -> tuple[float, float]:
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    process = ctx.Process(target=_drain, args=(url, batch, out))
    process.start()
    wall, cpu = out.get()
    process.join()
    return float(wall), float(cpu)


def _table(url: str) -> str:
    return "hailq_history" if url.startswith("sqlite") else f'"{schema_of(url)}".history'


def _execute(broker: hailq.Broker, text: str) -> None:
    """One statement of the benchmark's own, in a unit of work of the broker's."""
    broker.backend.dialect.work(  # type: ignore[attr-defined]
        lambda tx: tx.conn.execute(text), durable=True)


def bench_drain(url: str, runs: int, n: int) -> list[Figure]:
    """A drain of ``n`` messages with retention on and off, per batch size (1 and 10)."""
    queue = reset_hailq(url)
    broker = hailq.connect(url)
    found = []
    for batch in (1, 10):
        count = n // 4 if batch == 1 else n
        on: list[tuple[float, float]] = []
        off: list[tuple[float, float]] = []
        for run in range(runs):
            for retain in ((True, False) if run % 2 == 0 else (False, True)):
                broker.configure(QUEUE, retain="1d" if retain else None)
                _execute(broker, f"DELETE FROM {_table(url)}")
                _refill(queue, url, count)
                (on if retain else off).append(_one(url, batch))
        found += pair(f"drain with retention (vs off), batch {batch}", on, off)
    broker.configure(QUEUE, retain=None)
    _execute(broker, f"DELETE FROM {_table(url)}")
    broker.close()
    return found


def _fill(broker: hailq.Broker, url: str) -> None:
    """SEARCH_ROWS history rows (a minute's finishes per 60,000), in bulk statements of
    FILL_CHUNK rows each (each within a call's deadline, rule 31)."""
    for first in range(1, SEARCH_ROWS + 1, FILL_CHUNK):
        _fill_chunk(broker, url, first, first + FILL_CHUNK - 1)
    if not url.startswith("sqlite"):
        _execute(broker, f"ANALYZE {_table(url)}")


def _fill_chunk(broker: hailq.Broker, url: str, first: int, last: int) -> None:
    now = broker.now()
    sqlite = url.startswith("sqlite")
    numbers = (f"(WITH RECURSIVE c(i) AS (SELECT {first} UNION ALL SELECT i + 1 FROM c "
               f"WHERE i < {last}) SELECT i FROM c) AS s" if sqlite
               else f"generate_series({first}, {last}) AS s(i)")
    text = "i::text" if not sqlite else "CAST(i AS TEXT)"
    _execute(broker, f"""
        INSERT INTO {_table(url)} (id, queue, outcome, dedup_id, ordering_key, headers,
            priority, body, body_kind, attempts, errors, consumer, enqueued_at, started_at,
            finished_at)
        SELECT 'msg-' || {text}, 'bench-history', 'acked', 'dedup-' || {text},
               'key-' || CAST(i % {SEARCH_KEYS} AS TEXT),
               '{{"claim": "' || {text} || '"}}', 0, NULL, 0, 1, NULL, 'library',
               {now} - i / 1000.0 - 1, {now} - i / 1000.0 - 0.5, {now} - i / 1000.0
        FROM {numbers}""")


def _timed(broker: hailq.Broker, filters: list[dict[str, Any]]) -> list[float]:
    taken = []
    for f in filters:
        start = time.perf_counter()
        found = broker.history(**f)
        taken.append((time.perf_counter() - start) * 1000)
        assert found, f"nothing found for {f}"
    return taken


def bench_search(url: str) -> list[Figure]:
    """Lookups among SEARCH_ROWS finished messages: by id, dedup id and ordering key."""
    reset_hailq(url)
    broker = hailq.connect(url)
    broker.queue("bench-history", retain="7d")
    _execute(broker, f"DELETE FROM {_table(url)}")
    _fill(broker, url)
    pick = random.Random(40)
    found = []
    for name, field_, value in (("id", "id", "msg-{}"), ("dedup id", "dedup_id", "dedup-{}"),
                                ("ordering key", "ordering_key", "key-{}")):
        def make(i: int, field_: str = field_, value: str = value) -> dict[str, Any]:
            return {field_: value.format(i % SEARCH_KEYS if field_ == "ordering_key" else i)}

        _timed(broker, [make(pick.randint(1, SEARCH_ROWS)) for _ in range(5)])  # warm
        taken = _timed(broker, [make(pick.randint(1, SEARCH_ROWS)) for _ in range(LOOKUPS)])
        found.append(Figure(f"history search by {name}, 1M rows", "ms",
                            statistics.median(taken), max(taken), taken, []))
    _execute(broker, f"DELETE FROM {_table(url)}")
    broker.close()
    return found


def render_history(backend: str, figures: list[Figure]) -> list[str]:
    drains = [f for f in figures if f.name.startswith("drain with retention")]
    searches = [f for f in figures if f.name.startswith("history search")]
    lines: list[str] = []
    if drains:  # the baseline is hailq itself, retention off
        lines += [f"\n{backend}: what keeping history costs",
                  f"{'figure (msgs/s, median)':<48}{'on':>12}{'off':>12}{'ratio':>8}"]
        lines += [f"{f.name.replace(' (vs off)', ''):<48}{f.hailq:>12,.0f}"
                  f"{f.raw:>12,.0f}{f.ratio:>8.2f}" for f in drains]
    if searches:
        lines += [f"\n{backend}: finding a finished message",
                  f"{'figure':<48}{'median':>12}{'slowest':>12}"]
        lines += [f"{f.name:<48}{f.hailq:>9.2f} ms{f.raw:>9.2f} ms" for f in searches]
    return lines
