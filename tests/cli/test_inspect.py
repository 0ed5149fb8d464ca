"""``hailq queues``, ``hailq stats`` and ``hailq peek``: figures as tables and JSON."""

from __future__ import annotations

import json

import hailq

from .conftest import Hailq


def arrange(broker: hailq.Broker) -> None:
    """claims: 2 ready, 1 scheduled, 1 in flight, 1 blocked, 1 dead; audit: empty."""
    claims = broker.queue("claims", max_attempts=1)
    claims.send({"n": 1}, ordering_key="policy-1")
    claims.send({"n": 2}, ordering_key="policy-1")  # blocked behind the first
    claims.send({"n": 3}, priority=5)
    claims.send({"n": 4}, delay=600)
    claims.send({"n": 5})
    leased = claims.receive()  # priority 5 first
    assert leased[0].body == {"n": 3}
    broker.queue("audit")


def kill_one(broker: hailq.Broker) -> None:
    q = broker.queue("claims", max_attempts=1)
    # priority 9 goes first, so this is the message that dies
    q.send({"n": 6}, priority=9)
    (message,) = q.receive()
    message.nack(error="boom")


def test_queues_table_and_json(hq_any: Hailq, api_any: hailq.Broker) -> None:
    arrange(api_any)
    kill_one(api_any)
    rows = {q["queue"]: q for q in hq_any("queues", "--json").json()}
    assert set(rows) == {"claims", "audit"}
    claims = rows["claims"]
    assert (claims["ready"], claims["scheduled"], claims["in_flight"], claims["blocked"],
            claims["dead"]) == (2, 1, 1, 1, 1)
    assert claims["oldest_ready_age"] >= 0
    assert rows["audit"]["ready"] == 0 and rows["audit"]["oldest_ready_age"] is None
    table = hq_any("queues")
    assert table.code == 0
    claims_line = next(line for line in table.out.splitlines() if "claims" in line)
    assert [c.strip() for c in claims_line.split("│")[2:7]] == ["2", "1", "1", "1", "1"]
    assert "audit" in table.out and "IN FLIGHT" in table.out


def test_queues_when_there_are_none(hq: Hailq, api: hailq.Broker) -> None:
    assert hq("queues", "--json").json() == []
    assert "no queues yet" in hq("queues").out


def test_stats_has_every_figure(hq_any: Hailq, api_any: hailq.Broker) -> None:
    arrange(api_any)
    kill_one(api_any)
    (claims,) = hq_any("stats", "claims", "--json").json()["queues"]
    assert claims["queue"] == "claims"
    for field in ("ready", "scheduled", "in_flight", "blocked", "dead", "oldest_ready_age",
                  "sent", "acked", "nacked", "redelivered", "dead_lettered", "late_acks",
                  "parked_keys", "delayed", "backlog", "rates", "priorities", "workers",
                  "desired_workers"):
        assert field in claims
    assert claims["sent"] == 6
    assert claims["dead_lettered"] == 1
    assert claims["backlog"] == 4
    everything = hq_any("stats", "--json").json()
    assert {s["queue"] for s in everything["queues"]} == {"claims", "audit"}
    assert claims["desired_workers"] == 1  # work is ready and no worker runs
    table = hq_any("stats", "claims").out
    for figure in ("ready", "in flight", "dead lettered", "late acks", "parked keys"):
        assert figure in table


def test_stats_lists_parked_keys(hq: Hailq, api: hailq.Broker) -> None:
    q = api.queue("orders", max_attempts=1, on_dead="park")
    q.send(1, ordering_key="customer-7")
    q.send(2, ordering_key="customer-7")
    (message,) = q.receive()
    message.nack(error="boom")
    (orders,) = hq("stats", "orders", "--json").json()["queues"]
    assert orders["parked_keys"] == ["customer-7"]
    assert "customer-7" in hq("stats", "orders").out
    assert "customer-7" in hq("stats").out


def test_stats_watch_refreshes(hq_any: Hailq, api_any: hailq.Broker) -> None:
    api_any.queue("claims").send(1)
    result = hq_any("stats", "--watch", "--interval", "0.1", "--count", "3", "--json")
    assert result.code == 0, result.err
    frames = [json.loads(line) for line in result.out.splitlines()]
    assert len(frames) == 3
    once = hq_any("stats", "--json").json()
    assert set(once) == set(frames[0]) == {"at", "queues"}  # one shape, watched or not
    assert set(once["queues"][0]) == set(frames[0]["queues"][0])
    assert all(f["queues"][0]["ready"] == 1 for f in frames)
    table = hq_any("stats", "claims", "--watch", "--interval", "0.1", "--count", "2")
    assert table.code == 0 and table.out.count("queue claims") == 2
    hq_any("stats", "--count", "2").assert_clean_error()


def test_peek_shows_live_messages_without_leasing(hq_any: Hailq, api_any: hailq.Broker) -> None:
    q = api_any.queue("claims")
    ids = [q.send({"n": n}, priority=n % 3, headers={"n": str(n)}) for n in range(5)]
    peeked = hq_any("peek", "claims", "--json").json()
    assert {m["id"] for m in peeked} == set(ids)
    assert [m["priority"] for m in peeked] == sorted((m["priority"] for m in peeked),
                                                      reverse=True)
    assert all(m["attempt"] == 0 and m["state"] == "ready" for m in peeked)
    assert len(hq_any("peek", "claims", "--limit", "2", "--json").json()) == 2
    table = hq_any("peek", "claims").out
    assert all(i in table for i in ids)
    assert '{"n":4}' in table
    assert len(q.receive(10)) == 5  # peeking leased nothing


def test_peek_escapes_markup_and_control_characters(hq: Hailq, api: hailq.Broker) -> None:
    api.queue("claims").send("[bold red]boo[/]\x1b[2J")
    table = hq("peek", "claims").out
    assert "[bold red]boo[/]" in table
    assert "\x1b" not in table


def test_peek_says_on_stderr_how_many_it_left_out(hq_any: Hailq, api_any: hailq.Broker) -> None:
    arrange(api_any)  # claims: 5 live (ready, scheduled, in flight, blocked)
    kill_one(api_any)  # ... and 1 dead, which peek never shows
    cut = hq_any("peek", "claims", "--limit", "3", "--json")
    assert len(cut.json()) == 3  # stdout is still one JSON document
    assert cut.err == ("hailq: note: showing 3 of 5 live messages of claims; "
                       "use --limit to see more (up to 100,000)\n")
    assert "showing 3 of 5 live messages" in hq_any("peek", "claims", "--limit", "3").err
    whole = hq_any("peek", "claims", "--limit", "5")
    assert whole.code == 0 and whole.err == ""


def test_peek_counts_a_big_queue_with_thousands_separators(hq: Hailq,
                                                          api: hailq.Broker) -> None:
    api.queue("claims").send_many([{"n": n} for n in range(1234)])
    result = hq("peek", "claims")
    assert result.out.count('{"n":') == 10
    assert "showing 10 of 1,234 live messages of claims" in result.err


def test_queues_show_the_rate_limit_beside_the_other_settings(
        hq_any: Hailq, api_any: hailq.Broker) -> None:
    api_any.queue("results", rate="100/s", burst=20)
    api_any.queue("free")
    rows = {q["queue"]: q for q in hq_any("queues", "--json").json()}
    assert (rows["results"]["settings"]["rate"], rows["results"]["settings"]["burst"]) == \
        ("100/s", 20)
    assert rows["free"]["settings"]["rate"] is None
    line = next(x for x in hq_any("queues").out.splitlines() if "results" in x)
    assert "100/s" in line


def test_rule_25_stats_json_gives_per_priority_figures_as_a_list_of_objects(
        hq_any: Hailq, api_any: hailq.Broker) -> None:
    from hailq.observe.recorder import FigureRecorder

    claims = api_any.queue("claims", slo={9: 10, 0: 600})
    claims.send(1)
    recorder = FigureRecorder(api_any, ["claims"], lambda name: claims.settings.slo)
    for wait in (1.0, 12.0):
        recorder.observe("claims", 9, wait, 0.05, ok=True)
    recorder.observe("claims", 0, 30.0, 0.5, ok=True)
    recorder.flush()
    once = hq_any("stats", "claims", "--json").json()["queues"][0]
    watched = json.loads(hq_any("stats", "claims", "--watch", "--interval", "0.1", "--count",
                                "1", "--json").out.splitlines()[0])["queues"][0]
    for figures in (once, watched):
        rows = figures["priorities"]
        assert isinstance(rows, list) and [p["priority"] for p in rows] == [9, 0]
        vip, low = rows
        for field in ("wait_p50", "wait_p95", "wait_p99", "handler_p50", "handler_p95",
                      "handler_p99", "slo", "breaches", "compliance"):
            assert field in vip and field in low
        assert (vip["slo"], vip["started"], vip["breaches"], vip["compliance"]) == \
            (10.0, 2, 1, 0.5)
        assert (low["slo"], low["breaches"], low["compliance"]) == (600.0, 0, 1.0)
    table = hq_any("stats", "claims").out
    assert "BREACHES" in table and "50.00%" in table
