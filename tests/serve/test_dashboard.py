"""The dashboard's pages over real HTTP, on both backends (no browser: see
test_dashboard_browser.py for the clicks). The ``server`` fixture of conftest.py serves
a fresh broker with ``create_app`` behind the real security middleware."""

from __future__ import annotations

import re

import httpx
import pytest

import hailq
from hailq.internal import ops
from hailq.serve import pages_data
from waiting import wait_past

from .conftest import ADMIN, CLIENT, READ, Server

XSS_BODY = {"note": "<script>alert('body')</script>",
            "img": '<img src=x onerror="alert(1)">'}
XSS_ERROR = '<img src=x onerror=alert("error")>'


def kill(queue: hailq.Queue, error: str, n: int = 1) -> None:
    """Make ``n`` dead letters with ``error`` (max_attempts=1 queues)."""
    for message in queue.receive(max_messages=n, lease=30):
        message.nack(error=error, delay=0)


@pytest.fixture
def page(server: Server) -> httpx.Client:
    return server.client(ADMIN)


def test_rule_29_payloads_are_escaped_in_every_page(server: Server, page: httpx.Client,
                                                    broker: hailq.Broker) -> None:
    q = broker.queue("mail", max_attempts=1)
    q.send(XSS_BODY, headers={"x-evil": "<script>alert('header')</script>"},
           ordering_key="<b>key</b>")
    q.send(XSS_BODY)
    kill(q, XSS_ERROR)
    broker.topic("t").subscribe("mail", {"kind": "<script>x</script>"})
    for path in ("/", "/queues/mail", "/queues/mail/dead", "/topics",
                 "/queues/mail/dead?error=%3Cimg"):
        html = page.get(path).text
        assert "<script>alert" not in html, path
        assert "<img src=x" not in html, path
        assert "<b>key</b>" not in html, path
        assert "<script>x</script>" not in html, path
    dead = page.get("/queues/mail/dead").text
    assert "&lt;img src=x onerror=alert(&#34;error&#34;)&gt;" in dead  # shown, as text
    queue = page.get("/queues/mail").text
    assert "&lt;script&gt;alert(&#39;body&#39;)&lt;/script&gt;" in queue
    # The JSON embedded for the charts cannot close its script element either.
    assert "</script><" not in page.get("/").text.split('id="overview-data">')[1][:-40]


def test_rule_29_pages_forbid_inline_scripts(page: httpx.Client, broker: hailq.Broker) -> None:
    broker.queue("a")
    response = page.get("/")
    policy = response.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy
    html = response.text
    # Our own scripts only (the overview's charts apart), nothing fetched from elsewhere.
    scripts = re.findall(r"<script[^>]*src=\"([^\"]+)\"", html)
    assert scripts == ["/static/dashboard.js", "/static/charts.js", "/static/overview.js"]
    assert not re.search(r"(src|href)=\"(https?:)?//", html)
    for path in scripts:
        script = page.get(path)
        assert script.status_code == 200
        assert "http://" not in script.text.replace("http://www.w3.org/2000/svg", "")
        assert "https://" not in script.text


def test_rule_29_only_admins_see_action_buttons(server: Server, broker: hailq.Broker) -> None:
    q = broker.queue("jobs", max_attempts=1)
    q.send_many([1, 2])
    kill(q, "boom")
    admin, other, client = server.client(ADMIN), server.client(READ), server.client(CLIENT)
    for path in ("/", "/queues/jobs", "/queues/jobs/dead"):
        assert "data-action=" in admin.get(path).text, path
        assert client.get(path).status_code == 403  # a client only moves messages
        seen = other.get(path)
        assert seen.status_code == 200
        assert "data-action=" not in seen.text, path
        assert not re.search(r"<button[^>]*>\s*(Pause|Resume|Redrive|Delete)", seen.text)
    dead = admin.get("/queues/jobs/dead").text
    assert 'data-action="redrive-matching"' in dead and 'data-action="delete-matching"' in dead
    assert 'data-action="pause"' in admin.get("/queues/jobs").text


def test_pages_need_a_token(server: Server) -> None:
    anonymous = server.client(None)
    for path in ("/", "/queues/x", "/overview.json", "/workers"):
        assert anonymous.get(path).status_code == 401


def test_payloads_can_be_hidden(server: Server, page: httpx.Client,
                                broker: hailq.Broker) -> None:
    q = broker.queue("secret", max_attempts=1)
    q.send({"card": "4111-SECRET"}, headers={"auth": "HEADER-SECRET"})
    q.send({"card": "4111-DEAD-SECRET"})
    kill(q, "declined")
    shown = page.get("/queues/secret").text + page.get("/queues/secret/dead").text
    assert "4111-SECRET" in shown and "4111-DEAD-SECRET" in shown and "HEADER-SECRET" in shown
    hidden_client = server.client(ADMIN, cookies={"hailq_payloads": "hidden"})
    hidden = hidden_client.get("/queues/secret").text + \
        hidden_client.get("/queues/secret/dead").text
    assert "SECRET" not in hidden
    assert "declined" in hidden  # errors stay: they are what an operator acts on
    assert "Show payloads" in hidden


def test_rule_25_overview_shows_every_queue_at_a_glance(page: httpx.Client,
                                                        broker: hailq.Broker) -> None:
    a = broker.queue("alpha", max_attempts=1)
    a.send_many(list(range(5)))
    a.send("later", delay=3600)
    a.receive(max_messages=1, lease=300)
    kill(a, "bad")
    b = broker.queue("beta")
    b.pause()
    doc = page.get("/overview.json").json()
    rows = {q["name"]: q for q in doc["queues"]}
    assert set(rows) == {"alpha", "beta"}
    assert (rows["alpha"]["ready"], rows["alpha"]["in_flight"], rows["alpha"]["delayed"],
            rows["alpha"]["dead"]) == (3, 1, 1, 1)
    assert rows["alpha"]["oldest_ready_age"] is not None
    assert rows["beta"]["paused"] is True and rows["alpha"]["paused"] is False
    assert doc["totals"]["ready"] == 3 and doc["totals"]["paused"] == 1
    html = page.get("/").text
    row = html.split('data-queue="beta"')[1].split("</tr>")[0]
    assert "paused" in row and 'data-action="resume"' in row
    assert 'id="chart-depth"' in html and 'id="chart-rate"' in html


def test_rule_25_overview_agrees_with_stats(broker: hailq.Broker) -> None:
    q = broker.queue("orders", max_attempts=2, slo={9: 1.0})
    q.send_many([hailq.Envelope(i, priority=i % 10) for i in range(30)])
    q.send("x", delay=600)
    short = q.receive(max_messages=4, lease=0.01)  # they end: ready again as stats counts
    q.receive(max_messages=2, lease=300)
    wait_past(broker.now, max(m.lease_until for m in short))  # ended before either read
    broker.queue("empty")
    glance = {g.name: g for g in broker.overview()}
    for name in ("orders", "empty"):
        want = broker.get_queue(name).stats()
        got = glance[name].figures.stats
        assert (got.ready, got.scheduled, got.in_flight, got.blocked, got.dead, got.sent) == \
            (want.ready, want.scheduled, want.in_flight, want.blocked, want.dead, want.sent)
        assert got.oldest_ready_age == pytest.approx(want.oldest_ready_age, abs=5.0) \
            if want.oldest_ready_age is not None else got.oldest_ready_age is None
        assert glance[name].capped == frozenset()


def test_rule_25_overview_agrees_with_stats_with_aging_keys_and_ended_last_attempts(
        broker: hailq.Broker) -> None:
    aged = broker.queue("aged", aging=30, max_attempts=1)
    aged.send_many([hailq.Envelope(i, priority=i % 3) for i in range(12)])
    keyed = broker.queue("keyed", max_attempts=1)
    keyed.send_many([hailq.Envelope(i, ordering_key=f"k{i % 2}") for i in range(6)])
    ends = [m.lease_until for q in (aged, keyed)  # their last attempt: dead once it ends
            for m in q.receive(max_messages=2, lease=0.01)]
    wait_past(broker.now, max(ends))
    glance = {g.name: g for g in broker.overview()}
    for q in (aged, keyed):
        want, got = q.stats(), glance[q.name].figures.stats
        assert (got.ready, got.scheduled, got.in_flight, got.blocked, got.dead,
                got.dead_lettered) == (want.ready, want.scheduled, want.in_flight,
                                       want.blocked, want.dead, want.dead_lettered), q.name
        assert got.dead == 2
        assert got.oldest_ready_age == pytest.approx(want.oldest_ready_age, abs=5.0)
        assert q.count_dead_letters() == 2 == len(q.dead_letters())
        assert q.count_dead_letters(error_contains="lease expired") == 2
        assert q.count_dead_letters(older_than=3600) == 0
    assert glance["keyed"].figures.stats.blocked == 4  # behind their keys, as stats says


def test_counts_past_the_limit_are_shown_as_more_than(page: httpx.Client, broker: hailq.Broker,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pages_data, "COUNT_LIMIT", 5)
    q = broker.queue("big", max_attempts=1)
    q.send_many(list(range(9)))
    kill(q, "timeout", 7)
    doc = page.get("/overview.json").json()
    (row,) = doc["queues"]
    assert row["ready"] == 2 and row["dead"] == 5 and row["capped"] == ["dead"]
    assert doc["totals"]["dead_capped"] is True
    html = page.get("/").text
    assert "5+" in html.split('data-queue="big"')[1].split("</tr>")[0]
    monkeypatch.setattr(pages_data, "DEAD_COUNT_LIMIT", 4)
    dead = page.get("/queues/big/dead").text
    assert re.search(r'id="match-count">4\+<', dead)
    assert "Redrive 4 matching" in dead and "&#34;limit&#34;: 4" in dead
    glance = broker.overview(limit=3)[0]
    assert glance.capped == frozenset({"dead"}) and glance.figures.stats.dead == 3


def test_queue_page_shows_messages_settings_and_waits(page: httpx.Client,
                                                      broker: hailq.Broker) -> None:
    q = broker.queue("orders", lease=45, slo={9: 2.0})
    q.configure(max_attempts=7)
    q.send_many([hailq.Envelope({"n": i}, priority=9 if i % 2 else 0) for i in range(60)])
    html = page.get("/queues/orders").text
    settings = html.split('id="settings"')[1].split("</table>")[0]
    lease = settings.split("<th>lease</th>")[1].split("</tr>")[0]
    attempts = settings.split("<th>max_attempts</th>")[1].split("</tr>")[0]
    assert "45" in lease and "override" not in lease
    assert "7" in attempts and "override" in attempts
    assert "p9 within 2s" in settings
    messages = html.split('id="messages"')[1]
    assert messages.count("<tr>") - 1 == pages_data.DEFAULT_ROWS  # capped, header aside
    assert "more not shown" in html
    assert page.get("/queues/orders?limit=10").text.split('id="messages"')[1].count("<tr>") == 11
    assert page.get("/queues/orders?limit=100000").status_code == 400
    assert "p99" in html.lower() or "Nothing measured yet" in html


def test_queue_page_shows_waits_per_priority(page: httpx.Client, broker: hailq.Broker) -> None:
    from hailq.observe.recorder import FigureRecorder

    q = broker.queue("measured", slo={9: 0.5})
    recorder = FigureRecorder(broker, ["measured"], lambda _: {9: 0.5}, interval=3600)
    for wait in (0.1, 0.2, 2.0, 3.0):
        recorder.observe("measured", 9, wait, 0.01, True)
    recorder.flush()
    html = page.get("/queues/measured").text
    row = html.split('id="priorities"')[1].split("<tbody>")[1].split("</tr>")[0]
    assert "50.00%" in row  # two of four within 0.5 s
    assert '>2<' in row.replace(" ", "")  # breaches
    assert q.figures().priorities[0].breaches == 2


def test_dead_letters_page_filters_and_counts(page: httpx.Client, broker: hailq.Broker) -> None:
    q = broker.queue("mail", max_attempts=1)
    q.send_many([{"to": i} for i in range(5)])
    kill(q, "TimeoutError: smtp", 3)
    kill(q, "ValueError: template", 2)
    everything = page.get("/queues/mail/dead").text
    assert re.search(r'id="match-count">5<', everything)
    assert everything.count('data-action="redrive-one"') == 5
    timeouts = page.get("/queues/mail/dead", params={"error": "Timeout"}).text
    assert re.search(r'id="match-count">3<', timeouts)
    assert timeouts.count('data-action="redrive-one"') == 3
    assert "Redrive 3 matching" in timeouts
    # The bulk buttons carry the filter the API applies on the server, capped.
    box = timeouts.split('id="bulk"')[1].split(">")[0]
    assert "&#34;error&#34;: &#34;Timeout&#34;" in box
    assert "&#34;limit&#34;: 3" in box  # no more than the confirmation names
    old = page.get("/queues/mail/dead", params={"older_than": "3600"}).text
    assert re.search(r'id="match-count">0<', old) and "No dead letters match" in old
    assert page.get("/queues/mail/dead", params={"older_than": "soon"}).status_code == 400
    assert q.count_dead_letters(error_contains="Timeout") == 3
    assert q.count_dead_letters(limit=2) == 3


def test_rule_14_dead_letters_page_filters_by_ordering_key(page: httpx.Client,
                                                          broker: hailq.Broker) -> None:
    """Rule 14's third filter on the page, in its count and in what the bulk buttons send."""
    import html as html_lib
    import json

    q = broker.queue("mail", max_attempts=1)
    q.send_many([hailq.Envelope({"to": 1}, ordering_key="cust-1"),
                 hailq.Envelope({"to": 2}, ordering_key="cust-2"),
                 hailq.Envelope({"to": 3}), hailq.Envelope({"to": 4})])
    kill(q, "TimeoutError", 4)
    assert q.stats().dead == 4
    assert q.count_dead_letters(ordering_key="cust-1") == 1
    assert q.count_dead_letters(error_contains="Timeout", ordering_key="cust-9") == 0
    shown = page.get("/queues/mail/dead", params={"ordering_key": "cust-1"}).text
    assert re.search(r'id="match-count">1<', shown)
    assert shown.count('data-action="redrive-one"') == 1 and 'value="cust-1"' in shown
    raw = shown.split('data-filter="')[1].split('"')[0]
    body = json.loads(html_lib.unescape(raw))
    assert body == {"limit": 1, "ordering_key": "cust-1"}
    done = page.post("/api/queues/mail/dead/redrive", json=body)
    assert done.status_code == 200 and done.json() == {"redriven": 1}
    assert [m.ordering_key for m in q.peek(10)] == ["cust-1"] and q.stats().dead == 3
    assert page.get("/queues/mail/dead", params={"ordering_key": "k" * 300}).status_code == 400


def test_bulk_redrive_of_the_filter_through_the_api(page: httpx.Client,
                                                    broker: hailq.Broker) -> None:
    """What the page's "Redrive N matching" button sends, sent as the page sends it."""
    q = broker.queue("mail", max_attempts=1)
    q.send_many([{"to": i} for i in range(6)])
    kill(q, "TimeoutError", 4)
    kill(q, "ValueError", 2)
    html = page.get("/queues/mail/dead", params={"error": "Timeout"}).text
    raw = html.split('data-filter="')[1].split('"')[0]
    import html as html_lib
    import json

    body = json.loads(html_lib.unescape(raw))
    done = page.post("/api/queues/mail/dead/redrive", json=body)
    assert done.status_code == 200 and done.json() == {"redriven": 4}
    assert q.stats().ready == 4 and q.stats().dead == 2


def test_unknown_queue_is_a_404_page(page: httpx.Client) -> None:
    for path in ("/queues/nope", "/queues/nope/dead"):
        response = page.get(path)
        assert response.status_code == 404
        assert "no queue named" in response.text and "Traceback" not in response.text


def test_topics_workers_and_autoscalers(page: httpx.Client, broker: hailq.Broker) -> None:
    topic = broker.topic("events")
    topic.subscribe("audit")
    topic.subscribe("hooks", {"kind": ["paid"]})
    broker.topic("lonely")
    html = page.get("/topics").text
    assert "audit" in html and "hooks" in html and "paid" in html
    row = html.split('<td class="name">lonely')[1].split("</tr>")[0]
    assert "no subscriptions" in row
    assert "No worker has reported" in page.get("/workers").text
    now = broker.now()
    ops(broker).save_worker(hailq.WorkerInfo("w-1", "host-a", 123, ["audit"], 4, 1, now - 60, now,
                                        "running"))
    workers = page.get("/workers").text
    assert "w-1" in workers and "host-a" in workers and "running" in workers
    assert "No autoscaler decided" in page.get("/autoscalers").text
    broker.queue("audit")
    ops(broker).record_autoscale(hailq.AutoscalerInfo(
        "host-a:7:audit", "audit", "host-a", 7, 3, 4, "grow",
        "probing 3: backlog <b>500</b>", 0.0, ceiling=None, minimum=1, maximum=8))
    shown = page.get("/autoscalers").text
    row = shown.split('id="autoscalers"')[1].split("</tr>")[1]
    assert "host-a:7" in row and "grow" in row and "1–8" in row
    assert "&lt;b&gt;500&lt;/b&gt;" in shown and "<b>500</b>" not in shown  # escaped


def test_rule_32_a_message_looked_up_by_id(page: httpx.Client, broker: hailq.Broker) -> None:
    q = broker.queue("jobs", max_attempts=2)
    (first,) = q.send_many([{"n": 1}])
    for _ in range(2):
        q.receive()[0].nack(error="ConnectionError: db", delay=0)
    html = page.get(f"/queues/jobs/message?id={first}").text
    assert first in html and "s-dead" in html
    assert html.count("ConnectionError: db") == 1  # one error, shown once for both
    assert "attempts #1, #2" in html
    assert 'data-method="DELETE"' in html and "/dead/redrive" in html
    assert f'/queues/jobs/message?id={first}' in page.get("/queues/jobs/dead").text
    assert page.get("/queues/jobs/message?id=01ARZ3NDEKTSV4RRFFQ69G5FAV").status_code == 404
    assert page.get("/queues/jobs/message?id=nope").status_code == 400


@pytest.mark.parametrize("token", [READ, CLIENT])
def test_rule_32_operator_actions_are_offered_to_admins_only(server: Server,
                                                             broker: hailq.Broker,
                                                             token: str) -> None:
    broker.queue("jobs").send("x")
    broker.topic("events").subscribe("jobs")
    admin, other = server.client(ADMIN), server.client(token)
    queue = admin.get("/queues/jobs").text
    assert 'id="configure"' in queue and "Delete queue" in queue and "Purge messages" in queue
    topics = admin.get("/topics").text
    assert "Unsubscribe" in topics and "/api/topics/events?force=true" in topics
    assert 'id="configure"' not in other.get("/queues/jobs").text
    assert "Unsubscribe" not in other.get("/topics").text
