"""The autoscaler's decisions in the broker's database (rule 24) on both backends:
``Broker.autoscalers()``, ``hailq stats`` and the cap they put on ``desired_workers``;
the command's bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import hailq
from hailq.internal import ops
from hailq.models import AutoscalerInfo


def decision(n: int, *, autoscaler: str = "h:1:jobs", queue: str = "jobs",
             ceiling: int | None = None, action: str = "hold") -> AutoscalerInfo:
    host, pid, _ = autoscaler.split(":")
    return AutoscalerInfo(id=autoscaler, queue=queue, host=host, pid=int(pid), workers=n,
                          desired=n + 1, decision=action, reason=f"reason {n}", at=0.0,
                          ceiling=ceiling, minimum=1, maximum=8, throughput=10.0 * n,
                          handler_time=0.1)


def hailq_cli(*args: str, url: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "HAILQ_URL"}
    return subprocess.run([sys.executable, "-m", "hailq.cli.main", *args, "--url", url],
                          capture_output=True, text=True, env=env, timeout=120,
                          stdin=subprocess.DEVNULL)


def test_rule_24_each_autoscalers_last_decision_and_the_last_decisions_are_kept(
        broker: hailq.Broker) -> None:
    broker.queue("jobs")
    broker.queue("other")
    for n in (1, 2, 3):
        ops(broker).record_autoscale(decision(n, action="grow"))
    ops(broker).record_autoscale(decision(5, autoscaler="g:2:jobs"))
    ops(broker).record_autoscale(decision(7, autoscaler="g:3:other", queue="other"))
    last = broker.autoscalers("jobs")
    assert [(a.id, a.workers, a.decision) for a in last] == [("g:2:jobs", 5, "hold"),
                                                             ("h:1:jobs", 3, "grow")]
    first = last[1]
    assert (first.host, first.pid, first.desired, first.reason) == ("h", 1, 4, "reason 3")
    assert abs(first.at - broker.now()) < 60  # the broker's clock
    assert {a.queue for a in broker.autoscalers()} == {"jobs", "other"}
    assert [d.workers for d in broker.autoscale_decisions("jobs", 3)] == [5, 3, 2]
    with pytest.raises(hailq.InvalidArgument):
        broker.autoscale_decisions("jobs", 0)
    with pytest.raises(hailq.InvalidArgument):
        broker.autoscalers("bad name!")


def test_rule_24_a_measured_saturation_point_caps_desired_workers(
        broker: hailq.Broker) -> None:
    jobs = broker.queue("jobs")
    jobs.send_many(list(range(50)))
    stale = jobs.figures()
    ops(broker).record_autoscale(decision(4, ceiling=4))
    ops(broker).record_autoscale(decision(2, autoscaler="g:2:jobs", ceiling=2))
    capped = jobs.figures()
    assert capped.desired_workers <= 6 and [a.ceiling for a in capped.autoscalers] == [2, 4]
    assert capped.desired_workers == min(stale.desired_workers, 6)
    # One autoscaler that found no point yet: no cap from the others either.
    ops(broker).record_autoscale(decision(3, autoscaler="g:3:jobs"))
    assert jobs.figures().desired_workers == stale.desired_workers


def test_rule_33_a_rate_limit_caps_desired_workers_on_both_backends(broker: hailq.Broker) -> None:
    from hailq.backends.base import FiguresRecordParams, RateAdd

    jobs = broker.queue("jobs", rate="10/s")
    jobs.send_many(list(range(5000)))
    # 20 handler runs of 0.5 s each: the limit keeps 10/s x 0.5 s = 5 slots busy.
    broker.backend.figures_record(FiguresRecordParams(
        rates=[RateAdd(queue="jobs", priority=0, started=20, acked=20, handler_total=10.0)],
        sampled=["jobs"]))
    assert jobs.figures().desired_workers == 5
    unlimited = broker.queue("free")
    unlimited.send_many(list(range(5000)))
    broker.backend.figures_record(FiguresRecordParams(
        rates=[RateAdd(queue="free", priority=0, started=20, acked=20, handler_total=10.0)],
        sampled=["free"]))
    assert unlimited.figures().desired_workers > 5


def test_rule_24_hailq_stats_shows_the_last_decisions_with_their_reasons(url: str) -> None:
    with hailq.connect(url) as broker:
        broker.queue("jobs")
        broker.queue("other")
        ops(broker).record_autoscale(decision(4, ceiling=4, action="shrink"))
    shown = hailq_cli("stats", "jobs", url=url)
    assert shown.returncode == 0, shown.stderr
    assert "autoscale decisions (jobs)" in shown.stdout and "reason 4" in shown.stdout
    every = hailq_cli("stats", url=url)
    assert "autoscalers (each one's last decision)" in every.stdout
    assert "reason 4" in every.stdout
    document = json.loads(hailq_cli("stats", "jobs", "--json", url=url).stdout)
    (queue,) = document["queues"]
    assert queue["autoscalers"][0]["ceiling"] == 4
    assert queue["autoscalers"][0]["decision"] == "shrink"
    assert queue["autoscale_decisions"][0]["reason"] == "reason 4"


@pytest.mark.parametrize("args", [
    ["--queue", "jobs", "--min", "3", "--max", "2"],
    ["--queue", "jobs", "--max", "0"],
    ["--queue", "bad name!", "--max", "2"],
    ["--min", "1", "--max", "2"],
    ["--queue", "jobs", "--max", "2", "--interval", "0"],
])
def test_bad_autoscale_options_are_refused_before_anything_starts(
        args: list[str], sqlite_url: str) -> None:
    done = hailq_cli("autoscale", "autoscale_handlers:sleepy", *args, url=sqlite_url)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("hailq: error:") or "Error" in done.stderr
    assert "Traceback" not in done.stderr
