"""``hailq subscribe``, ``hailq topics`` and ``hailq publish``."""

from __future__ import annotations

import hailq

from .conftest import Hailq


def test_subscribe_creates_topic_and_queue(hq_any: Hailq, api_any: hailq.Broker) -> None:
    result = hq_any("subscribe", "claims.events", "audit", "--json").json()
    assert result == {"topic": "claims.events", "subscription": "audit", "filter": None}
    assert [t.name for t in api_any.topics()] == ["claims.events"]
    assert [q.name for q in api_any.queues()] == ["audit"]


def test_filters_repeat_for_several_values(hq: Hailq, api: hailq.Broker) -> None:
    hq("subscribe", "events", "billing", "-f", "type=invoice", "-f", "type=refund",
       "--filter", "region=eu")
    (subscription,) = hailq.Topic(api, "events").subscriptions()
    assert subscription.filter == {"type": ["invoice", "refund"], "region": "eu"}


def test_topics_lists_subscriptions_and_filters(hq: Hailq) -> None:
    hq("subscribe", "events", "audit")
    hq("subscribe", "events", "billing", "-f", "type=invoice")
    hq("subscribe", "alerts", "pager", "-f", "level=page")
    listing = hq("topics", "--json").json()
    by_topic = {t["topic"]: t["subscriptions"] for t in listing}
    assert by_topic["events"] == [{"subscription": "audit", "filter": None},
                                  {"subscription": "billing", "filter": {"type": "invoice"}}]
    assert by_topic["alerts"] == [{"subscription": "pager", "filter": {"level": "page"}}]
    table = hq("topics").out
    for text in ("events", "audit", "billing", "type=invoice", "alerts", "pager"):
        assert text in table


def test_publish_copies_into_matching_subscriptions(hq_any: Hailq,
                                                    api_any: hailq.Broker) -> None:
    hq_any("subscribe", "events", "audit")
    hq_any("subscribe", "events", "billing", "-f", "type=invoice")
    result = hq_any("publish", "events", '{"invoice": 7}', "-H", "type=invoice", "-p", "6",
                    "--json").json()
    assert set(result["copies"]) == {"audit", "billing"}
    (copy,) = api_any.get_queue("billing").receive()
    assert copy.id == result["copies"]["billing"]
    assert (copy.body, copy.priority, copy.headers) == ({"invoice": 7}, 6, {"type": "invoice"})
    other = hq_any("publish", "events", '"hello"', "-H", "type=memo")
    assert other.code == 0 and "audit" in other.out and "billing" not in other.out


def test_publish_that_matches_nothing_warns(hq: Hailq) -> None:
    hq("subscribe", "events", "billing", "-f", "type=invoice")
    result = hq("publish", "events", "1", "--json")
    assert result.json() == {"topic": "events", "copies": {}}
    assert "went nowhere" in result.err


def test_bad_subscription_input(hq: Hailq) -> None:
    hq("subscribe", "events", "bad name").assert_clean_error()
    hq("subscribe", "events", "audit", "-f", "novalue").assert_clean_error()
    assert hq("subscribe", "events", "audit").code == 0
    hq("publish", "events", "1", "--priority", "11").assert_clean_error()
    assert hq("topics", "--json").json() == [
        {"topic": "events", "subscriptions": [{"subscription": "audit", "filter": None}]}]
