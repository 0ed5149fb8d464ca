"""deploy/prometheus/ and deploy/grafana/: the alert rules pass ``promtool check rules``
and their unit tests (``promtool test rules``, every alert both firing and quiet), the
dashboard's queries parse, and every metric name the rules and the dashboard use is
one that a real exporter and a real worker serve (scraped from a broker with traffic,
so a renamed series fails here).

promtool comes with Debian's ``prometheus`` package (.ci/run installs it). Without it
these tests skip, except in CI (``CI`` set), where they fail.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

import hailq
from hailq.internal import ops
from hailq.models import AutoscalerInfo
from hailq.observe.prometheus import collect_figures, exposition
from ports import free_port
from waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "hailq-alerts.yaml"
RULE_TESTS = ROOT / "deploy" / "prometheus" / "hailq-alerts.test.yaml"
DASHBOARD = ROOT / "deploy" / "grafana" / "hailq-dashboard.json"
ALERTS = {"HailqServiceLevelBurnFast", "HailqServiceLevelBurnSlow", "HailqDeadLettersRising",
          "HailqQueueOlderThanTarget", "HailqNoWorkersForReadyWork",
          "HailqAutoscalerAtMaximum", "HailqMetricsAbsent"}
# Grafana's variables, replaced by what they stand for before promtool reads a query.
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$__interval": "1m", "$queue": ".*"}

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_SELECTOR = re.compile(r"(?<![\w:.$])([a-zA-Z_:][\w:]*)\s*(?=\{|\[)")
_HAILQ_NAME = re.compile(r"(?<![\w:])hailq_\w+")
_RECORDED = re.compile(r"(?<![\w:])hailq:[\w:]+")


@pytest.fixture(scope="module")
def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("promtool is missing; CI installs Debian's prometheus package")
        pytest.skip("promtool is not installed (apt-get install prometheus); CI runs these")
    return found


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=120, cwd=cwd)


def rules() -> list[dict[str, Any]]:
    return [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]


def dashboard() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return doc


def dashboard_queries() -> list[str]:
    return [t["expr"] for p in dashboard()["panels"] for t in p.get("targets", [])]


def concrete(expr: str) -> str:
    for variable, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(variable, value)
    return expr


def names(expr: str) -> set[str]:
    """The series names an expression reads (quoted label values left out)."""
    bare = _STRING.sub('""', expr)
    return set(_HAILQ_NAME.findall(bare)) | set(_RECORDED.findall(bare)) | {
        n for n in _SELECTOR.findall(bare) if n not in ("by", "on", "without", "ignoring")}


# -- the rules -------------------------------------------------------------------------


def test_promtool_accepts_the_rules(promtool: str) -> None:
    result = run(promtool, "check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert {r["alert"] for r in rules() if "alert" in r} == ALERTS


def test_every_alert_has_a_unit_test_that_fires_it_and_one_that_does_not() -> None:
    cases: dict[str, list[bool]] = {}
    for group in yaml.safe_load(RULE_TESTS.read_text())["tests"]:
        for case in group.get("alert_rule_test", []):
            cases.setdefault(case["alertname"], []).append(bool(case["exp_alerts"]))
    assert set(cases) == ALERTS
    for alert, fired in cases.items():
        assert True in fired and False in fired, f"{alert}: fired {fired}"


def test_the_alerts_unit_tests_pass(promtool: str, tmp_path: Path) -> None:
    result = run(promtool, "test", "rules", RULE_TESTS.name, cwd=RULES.parent)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout
    # The tests can fail: a rule that never fires is caught.
    broken = tmp_path / RULES.name
    broken.write_text(RULES.read_text().replace(
        'max by (queue) (hailq_queue_workers) == 0', 'max by (queue) (hailq_queue_workers) < 0'))
    shutil.copy(RULE_TESTS, tmp_path / RULE_TESTS.name)
    failed = run(promtool, "test", "rules", RULE_TESTS.name, cwd=tmp_path)
    assert failed.returncode != 0
    assert "HailqNoWorkersForReadyWork" in failed.stdout + failed.stderr


# -- the dashboard ---------------------------------------------------------------------


def test_the_dashboard_is_importable_and_its_queries_parse(promtool: str,
                                                            tmp_path: Path) -> None:
    doc = dashboard()
    assert doc["uid"] == "hailq-overview" and doc["title"] == "hailq"
    variables = {v["name"]: v for v in doc["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    assert "hailq_queue_messages" in variables["queue"]["definition"]
    ids = [p["id"] for p in doc["panels"]]
    assert len(ids) == len(set(ids))
    for panel in doc["panels"]:
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel
        assert panel["targets"] and panel.get("description"), panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == panel["datasource"]
    queries = dashboard_queries()
    assert len(queries) >= 20
    # promtool parses each query as a recording rule's expression.
    check = tmp_path / "dashboard-queries.yaml"
    check.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:query_{n}", "expr": concrete(q)}
        for n, q in enumerate(queries)]}]}))
    result = run(promtool, "check", "rules", str(check))
    assert result.returncode == 0, result.stdout + result.stderr


# -- the names, against a real exporter and a real worker --------------------------------

HANDLERS = textwrap.dedent('''
    import time

    import hailq
    from hailq.runtime import App

    app = App("alerts")


    def check(message: hailq.Message) -> None:
        if message.body == "poison":
            raise hailq.DeadLetter("not a claim")
        time.sleep(0.005)


    app.add("claims", check)
''')


def scrape(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def arrange(broker: hailq.Broker) -> hailq.Queue:
    """claims: VIP messages past their 50 ms target, normal ones within 60 s, a poison
    message that dies; an autoscaler's decision at 2 of at most 4 workers."""
    claims = broker.queue("claims", slo={9: 0.05, 0: 60}, max_attempts=1)
    claims.send_many([hailq.Envelope({"n": n}, priority=9) for n in range(10)])
    claims.send_many([{"n": n} for n in range(10)])
    claims.send("poison")
    ops(broker).record_autoscale(AutoscalerInfo(
        id="h1:41:claims", queue="claims", host="h1", pid=41, workers=2, desired=3,
        decision="grow", reason="backlog", at=0.0, minimum=1, maximum=4))
    return claims


@pytest.fixture
def served(sqlite_url: str, tmp_path: Path) -> Iterator[set[str]]:
    """Sample names of ``hailq metrics`` and of a worker's --metrics-port, after a real
    worker handled the arranged traffic."""
    broker = hailq.connect(sqlite_url)
    claims = arrange(broker)
    time.sleep(0.1)  # the VIP claims wait past their target
    (tmp_path / "alert_handlers.py").write_text(HANDLERS)
    env = dict(os.environ, HAILQ_URL=sqlite_url,
               PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    port = free_port()
    worker = subprocess.Popen(
        [sys.executable, "-m", "hailq.cli.main", "worker", "alert_handlers:app", "-q", "claims",
         "--metrics-port", f"127.0.0.1:{port}"], env=env, cwd=tmp_path,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        def handled() -> str:
            """The worker's exposition once it handled every claim, else ""."""
            stats = claims.stats()
            figures = scrape(exposition(collect_figures(broker)).decode())
            started = figures.get(("hailq_wait_seconds_count",
                                   (("priority", "0"), ("queue", "claims"))), 0)
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                    text = r.read().decode()
            except OSError:
                return ""
            done = stats.acked == 20 and stats.dead == 1 and started >= 11
            return text if done and "hailq_worker_handler_seconds_count" in text else ""

        if not wait_until(lambda: handled() != "", 60, step=0.1):
            pytest.fail(f"the worker did not handle the claims: {claims.stats()}")
        worker_text = handled()
        result = subprocess.run([sys.executable, "-m", "hailq.cli.main", "metrics"], env=env,
                                capture_output=True, text=True, timeout=60, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        exporter = scrape(result.stdout)
        p9 = (("priority", "9"), ("queue", "claims"))
        assert exporter[("hailq_slo_breaches_total", p9)] >= 1  # real traffic got there
        assert exporter[("hailq_messages_dead_lettered_total", (("queue", "claims"),))] == 1
        yield {name for name, _ in exporter} | {name for name, _ in scrape(worker_text)}
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(30)
        finally:
            if worker.poll() is None:
                worker.kill()
                worker.wait(10)
        broker.close()


def test_every_metric_name_in_the_rules_and_the_dashboard_is_served(
        served: set[str]) -> None:
    recorded = {r["record"] for r in rules() if "record" in r}
    used_by_rules = set().union(*(names(r["expr"]) for r in rules()))
    used_by_dashboard = set().union(*(names(q) for q in dashboard_queries()))
    for where, used in (("the rules", used_by_rules), ("the dashboard", used_by_dashboard)):
        assert used, where
        unknown = {n for n in used if n not in served and n not in recorded}
        assert not unknown, f"{where} use series nobody serves: {sorted(unknown)}"
    # Histograms are read by their suffixed series, as Prometheus stores them.
    assert "hailq_wait_seconds_count" in used_by_rules
    assert {"hailq_wait_seconds_bucket", "hailq_wait_seconds_sum", "hailq_wait_seconds_count",
            "hailq_worker_handler_seconds_bucket", "hailq_worker_slots_busy",
            "hailq_queue_sent_per_second"} <= used_by_dashboard
    assert recorded <= used_by_rules  # every recording rule feeds an alert


def test_names_finds_series_and_skips_label_values() -> None:
    expr = ('max by (queue) (rate(hailq_x_total{queue="hailq_y",state=~"a|b"}[5m])) '
            '/ on (queue) hailq:ratio:rate5m > up{job="hailq_z"}')
    assert names(expr) == {"hailq_x_total", "hailq:ratio:rate5m", "up"}


def test_the_exporter_serves_targets_and_autoscaler_bounds(broker: hailq.Broker) -> None:
    """The limits the alerts compare with, on both backends: each priority's target, and
    the workers and --max of each running autoscaler (a stopped one is left out)."""
    arrange(broker)
    ops(broker).record_autoscale(AutoscalerInfo(
        id="h2:7:claims", queue="claims", host="h2", pid=7, workers=0, desired=0,
        decision="stop", reason="stopped", at=0.0, minimum=0, maximum=6))
    broker.queue("audit")
    got = scrape(exposition(collect_figures(broker)).decode())
    target = {labels: v for (name, labels), v in got.items()
              if name == "hailq_queue_slo_target_seconds"}
    assert target == {(("priority", "0"), ("queue", "claims")): 60.0,
                      (("priority", "9"), ("queue", "claims")): 0.05}
    scaler = (("autoscaler", "h1:41:claims"), ("queue", "claims"))
    assert got[("hailq_autoscaler_workers", scaler)] == 2
    assert got[("hailq_autoscaler_max_workers", scaler)] == 4
    assert not any(dict(labels).get("autoscaler") == "h2:7:claims" for _, labels in got)
