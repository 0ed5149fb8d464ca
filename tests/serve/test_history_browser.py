"""The history page in a real headless Chromium (Debian's ``/usr/bin/chromium`` driven
by Playwright), against a real server on each backend: the filters narrow the rows, an
attempt's error and consumer unfold, a body left out says so."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import hailq

pytestmark = pytest.mark.slow


def test_history_page_filters_in_a_browser(open_page: Callable[..., Any],
                                           broker: hailq.Broker) -> None:
    q = broker.queue("claims", retain="24h")
    private = broker.queue("cards", retain="24h", retain_bodies=False)
    wanted = q.send({"claim": 4711}, headers={"claim_id": "4711"})
    other = q.send({"claim": 4712}, headers={"claim_id": "4712"})
    secret = private.send("4111 1111 1111 1111")
    first = {m.id: m for m in q.receive(2)}
    first[wanted].nack(delay=0, error="bank timed out")
    first[other].ack()
    q.receive(1)[0].ack()
    private.receive(1)[0].ack()

    page = open_page("/history")
    assert page.locator("#history tbody tr").count() == 3
    page.fill("input[name=header]", "claim_id=4711")
    page.click("#history-filter button[type=submit]")
    page.wait_for_url("**/history?*header=claim_id%3D4711*")
    rows = page.locator("#history tbody tr")
    assert rows.count() == 1 and rows.first.get_attribute("data-id") == wanted
    rows.first.locator("details.attempts summary").click()
    attempts = rows.first.locator("details.attempts li")
    assert attempts.count() == 2
    assert "bank timed out" in attempts.nth(0).inner_text()
    assert "library" in attempts.nth(1).inner_text()

    page.fill("input[name=header]", "")
    page.select_option("select[name=outcome]", "acked")
    page.fill("input[name=queue]", "cards")
    page.click("#history-filter button[type=submit]")
    page.wait_for_url("**/history?*queue=cards*")
    rows = page.locator("#history tbody tr")
    assert rows.count() == 1 and rows.first.get_attribute("data-id") == secret
    assert "not kept" in rows.first.inner_text()
    assert "4111" not in page.content()
