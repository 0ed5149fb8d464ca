"""Smoke test of the per-key order benchmark at a tiny size: it drains everything."""

from __future__ import annotations

import math

import hailq
from hailq.bench.runner import QUEUE, bench_keys, fill_keyed


def test_bench_keys_drains_keyed_and_plain_messages(url: str) -> None:
    figure = bench_keys(url, 1, 2_000, 10, keys=100)
    assert figure.name == "receive+ack, 100 order keys (vs none), batch 10"
    assert math.isfinite(figure.hailq) and figure.hailq > 0 and figure.raw > 0
    with hailq.connect(url) as broker:
        stats = broker.get_queue(QUEUE).stats()
    assert (stats.ready, stats.in_flight, stats.dead) == (0, 0, 0)
    assert stats.acked == 4_000  # both drains, every message


def test_keyed_fill_spreads_messages_over_the_keys_in_turn(url: str) -> None:
    with hailq.connect(url) as broker:
        queue = broker.queue("keyed")
        fill_keyed(queue, 30, 10)
        heads = queue.receive(max_messages=30)  # one head per key; the rest wait behind
        assert sorted(m.ordering_key or "" for m in heads) == sorted(
            f"policy-{k}" for k in range(10))
        assert queue.ack_many(heads) == [False] * 10
        assert len(queue.receive(max_messages=30)) == 10  # the next of each key


def test_keyed_figures_get_a_table_of_their_own() -> None:
    from hailq.bench.command import render
    from hailq.bench.runner import Figure

    text = render("SQLite", [Figure("receive+ack, 10,000 order keys (vs none), batch 1",
                                    "msgs/s", 750.0, 1_000.0)])
    assert "SQLite: per-key order" in text and "no keys" in text and "0.75" in text
    assert "raw driver" not in text  # its baseline is hailq without keys
