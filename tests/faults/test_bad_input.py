"""SPEC rule 27 at scale: every input is accepted and round-trips exactly, or is rejected cleanly.

Hypothesis throws names, bodies, headers, priorities, delays, ordering keys,
dedup ids and receipts at the Python API (and a few at the CLI). An accepted
message must come back with exactly the body, headers, priority and ordering
key it was sent with; a rejected one must raise a ``HailqError`` and write
nothing. Afterwards the database schema is exactly what it was.
"""

from __future__ import annotations

import itertools
import math
import re
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hailq

from .workers import SRC

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")  # SPEC rule 1, verbatim
MAX_DELAY = 366 * 86400
_examples = itertools.count()

FUZZ = settings(max_examples=80, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])

# -- strategies -----------------------------------------------------------------------------------

weird_text = st.one_of(st.text(), st.text(st.characters(codec=None), max_size=20),
                       st.sampled_from(["", "\x00", "a\x00b", "\ud800", "é" * 300, " ", "\n"]))
json_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), weird_text)
json_like = st.recursive(
    json_leaf,
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.one_of(weird_text, st.integers()), inner,
                                            max_size=4),
                            st.tuples(inner), st.frozensets(st.integers(), max_size=2)),
    max_leaves=12)
bodies = st.one_of(json_like, st.binary(max_size=64), st.just(bytearray(b"\x00\xff")),
                   st.builds(object), st.just(b"x" * (1024 * 1024 + 1)))
priorities = st.one_of(st.integers(-3, 12), st.booleans(), st.floats(), st.none(),
                       st.just("5"))
delays = st.one_of(st.integers(-5, 10), st.floats(), st.just(MAX_DELAY + 1),
                   st.builds(timedelta, seconds=st.integers(-10, 10)), st.just("1"),
                   st.none())
keys = st.one_of(st.none(), weird_text, st.integers(), st.just("k" * 256))
headers = st.one_of(st.none(), st.dictionaries(weird_text, weird_text, max_size=3),
                    st.dictionaries(st.integers(), st.integers(), max_size=2),
                    st.lists(st.text(), max_size=2))


# -- helpers --------------------------------------------------------------------------------------


def same(a: Any, b: Any) -> bool:
    """Equal values of equal JSON types (so 1 != 1.0 != True, and -0.0 is 0.0's twin)."""
    if isinstance(a, bytes | bytearray | memoryview):
        return isinstance(b, bytes) and bytes(a) == b
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return bool(a == b)


def schema_of(url: str) -> list[tuple[Any, ...]]:
    if url.startswith("sqlite:"):
        conn = sqlite3.connect(url[len("sqlite:///"):].split("?")[0])
        try:
            return conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master "
                                "ORDER BY name").fetchall()
        finally:
            conn.close()
    import psycopg

    schema = url.split("schema=")[1].split("&")[0]
    with psycopg.connect(url.split("?")[0]) as conn:
        cols = conn.execute(
            "SELECT table_name, column_name, data_type, is_nullable, column_default "
            "FROM information_schema.columns WHERE table_schema = %s "
            "ORDER BY table_name, column_name", (schema,)).fetchall()
        idx = conn.execute("SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s "
                           "ORDER BY indexname", (schema,)).fetchall()
        return [*cols, *idx]


@pytest.fixture
def fuzz_broker(url: str) -> Iterator[hailq.Broker]:
    with hailq.connect(url) as broker:
        broker.queue("fuzz")
        before = schema_of(url)
        yield broker
        assert schema_of(url) == before, "bad input changed the schema"


def _nothing_written(q: hailq.Queue, sent_before: int) -> None:
    assert q.stats().sent == sent_before
    assert q.peek() == []


# -- the API --------------------------------------------------------------------------------------


@FUZZ
@given(body=bodies, priority=priorities, key=keys, delay=delays, hdrs=headers, dedup=keys)
def test_send_accepts_and_round_trips_exactly_or_rejects_with_hailq_error(
        fuzz_broker: hailq.Broker, body: Any, priority: Any, key: Any, delay: Any, hdrs: Any,
        dedup: Any) -> None:
    q = fuzz_broker.queue(f"fuzz-{next(_examples)}")  # dedup ids must not meet old ones
    sent_before = q.stats().sent
    try:
        message_id = q.send(body, priority=priority, ordering_key=key, delay=delay,
                            headers=hdrs, dedup_id=dedup)
    except hailq.HailqError as exc:
        assert str(exc), "an error must say what was wrong"
        _nothing_written(q, sent_before)
        valid_priority = type(priority) is int and 0 <= priority <= 9
        assert not (valid_priority and _surely_valid(body, key, delay, hdrs, dedup)), exc
        return
    assert type(priority) is int and 0 <= priority <= 9, f"priority {priority!r} accepted"
    [peeked] = q.peek(limit=5)
    assert peeked.id == message_id
    assert same(body, peeked.body), (body, peeked.body)
    assert peeked.headers == (hdrs or {})
    assert (peeked.priority, peeked.ordering_key) == (priority, key)
    wanted = delay.total_seconds() if isinstance(delay, timedelta) else float(delay)
    assert abs((peeked.available_at - peeked.enqueued_at) - wanted) < 1.0
    assert q.purge(dead=False) == 1


def _surely_valid(body: Any, key: Any, delay: Any, hdrs: Any, dedup: Any) -> bool:
    """Inputs SPEC plainly allows: these must never be rejected."""
    def plain(text: Any) -> bool:
        return isinstance(text, str) and 1 <= len(text) <= 64 and text.isprintable() \
            and text.isascii()

    json_ok = (isinstance(body, bytes) and len(body) <= 1024 * 1024) or (
        body is None or isinstance(body, bool | int)
        or (isinstance(body, float) and math.isfinite(body)) or plain(body))
    delay_ok = type(delay) is int and 0 <= delay <= 10
    return (json_ok and (key is None or plain(key)) and (dedup is None) and delay_ok
            and (hdrs is None or (isinstance(hdrs, dict) and all(
                plain(k) and plain(v) for k, v in hdrs.items()))))


@FUZZ
@given(name=st.one_of(weird_text, st.from_regex(NAME, fullmatch=True), st.integers(),
                      st.just("a" * 129)))
def test_queue_names_follow_the_spec_pattern_exactly(fuzz_broker: hailq.Broker,
                                                      name: Any) -> None:
    valid = isinstance(name, str) and NAME.fullmatch(name) is not None
    try:
        q = fuzz_broker.queue(name)
    except hailq.HailqError as exc:
        assert not valid, f"valid name {name!r} rejected: {exc}"
        assert all(existing.name != name for existing in fuzz_broker.queues())
        return
    assert valid, f"invalid name {name!r} accepted"
    assert fuzz_broker.get_queue(name).name == name
    q.send("hello")
    [m] = q.receive()
    assert m.queue == name
    m.ack()


@FUZZ
@given(receipt=st.one_of(weird_text, st.integers(), st.none(),
                         st.from_regex(r"[0-9A-Z]{26}[.:][0-9a-f]{16}", fullmatch=True)),
       seconds=st.one_of(st.floats(), st.integers(-2, 5)))
def test_forged_receipts_never_ack_nack_or_extend(fuzz_broker: hailq.Broker, receipt: Any,
                                                   seconds: Any) -> None:
    q = fuzz_broker.queue("receipts", lease=60)
    if not q.peek():
        q.send("the only message")
    for call in (lambda: q.ack(receipt), lambda: q.nack(receipt, delay=0),
                 lambda: q.extend(receipt, seconds), lambda: q.redrive([receipt])):
        try:
            result = call()
        except hailq.HailqError:
            continue
        assert call is not None and result == 0, f"{receipt!r} was accepted"
    [left] = q.peek()
    assert left.state == "ready" and left.attempt == 0


# -- the CLI (few examples: each is a process) ---------------------------------------------------

CLI_CASES: list[tuple[list[str], Any]] = [
    (["send", "--create", "fuzz", '{"a": [1, 2.5, "ü\\u0000"], "b": null}'],
     {"a": [1, 2.5, "ü\x00"], "b": None}),
    (["send", "--create", "fuzz", "-p", "9", "-k", "kä y", "-H", "x=1=2", '"text"'], "text"),
    (["send", "--create", "fuzz", "--raw", "bytes \u00ff"], "bytes \u00ff".encode()),
    (["send", "--create", "fuzz", "[1, 2"], None),
    (["send", "--create", "fuzz", "-p", "10", "1"], None),
    (["send", "--create", "fuzz", "-H", "novalue", "1"], None),
]


@pytest.mark.parametrize(("args", "expected"), CLI_CASES,
                         ids=[" ".join(a)[:40] for a, _ in CLI_CASES])
def test_cli_send_round_trips_or_fails_with_one_clean_line(
        fuzz_broker: hailq.Broker, url: str, args: list[str], expected: Any) -> None:
    q = fuzz_broker.get_queue("fuzz")
    done = subprocess.run([sys.executable, "-m", "hailq.cli.main", *args, "--url", url],
                          capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"})
    if expected is None:
        assert done.returncode in (1, 2), done
        assert "Traceback" not in done.stderr, done.stderr
        assert done.stderr.strip(), "a rejected command must say why"
        _nothing_written(q, 0)
        return
    assert done.returncode == 0, done.stderr
    [peeked] = q.peek()
    assert peeked.id == done.stdout.strip().split()[-1]
    assert same(expected, peeked.body), (expected, peeked.body)
    if "-p" in args:
        assert peeked.priority == 9 and peeked.ordering_key == "kä y"
        assert peeked.headers == {"x": "1=2"}
