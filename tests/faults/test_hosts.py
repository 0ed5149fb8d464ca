"""Many worker hosts on one PostgreSQL server (SPEC rules 9, 12, 23): namespaces as hosts.

Each "host" is a Linux network namespace of the test's own (``netns.HostRig``);
``hailq worker`` processes run inside them and reach a throwaway PostgreSQL server,
pinned to one core, over their veth pair and nothing else. Handlers wait (an
I/O-bound check) and write each effect through the inbox into a ledger table.

- The hailstorm over 1, 2 and 4 hosts: 20,000 claims, 50 handler slots, drained:
  lost 0, duplicate effects 0 (the full matrix: ``make test-faults``; the curve
  with medians: ``scripts/hosts_curve.py``, docs/guides/scaling.md).
- One host cut off mid-storm (its link down): its leases end, the other hosts
  receive its claims again, and when the link returns its acks of those messages
  are refused (fencing across hosts, rule 9) and the inbox keeps every effect single.
  This one runs in ``.ci/run``.

Where namespaces cannot be made (not root, no ``ip``) these tests skip, and fail in CI.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import Figure
from .netns import (
    NS_PREFIX,
    HostRig,
    HostWorkers,
    NetServer,
    clean_stale,
    hailstorm,
    need_namespaces,
    start_server,
    worker_env,
)

HOSTS = 4
LEASE = 2.0  # short: a cut-off host's leases end within seconds
WORK = 0.05  # seconds a handler waits per message (the image check's I/O)


@pytest.fixture(scope="module")
def rig() -> Iterator[HostRig]:
    need_namespaces()
    made = HostRig(HOSTS)
    try:
        yield made
    finally:
        made.destroy()


@pytest.fixture(scope="module")
def server(rig: HostRig) -> Iterator[NetServer]:
    # A session idle inside a transaction (its host cut off mid-effect) holds the inbox
    # row of its message; the server ends it so the redelivery elsewhere can go on.
    made = start_server(rig, settings={"idle_in_transaction_session_timeout": "5s"})
    try:
        yield made
    finally:
        made.destroy()


def test_hosts_reach_only_their_server_and_the_rig_is_removed_afterwards(
        rig: HostRig, server: NetServer) -> None:
    assert len(rig.alive) == HOSTS
    assert server.affinity() == {0}
    for host in rig.hosts[:2]:
        code = (f"import psycopg; c = psycopg.connect({server.url_for(host.server_address)!r}, "
                "connect_timeout=5); print(c.execute('SELECT inet_client_addr()').fetchone()[0])")
        seen = host.run(sys.executable, "-c", code)
        assert seen.returncode == 0, seen.stderr
        assert seen.stdout.strip() == host.address  # the server sees the host's own address
    # Nothing else is reachable: not the machine's shared server, not another host.
    other = rig.hosts[1]
    for target in (["127.0.0.1", "5432"], [other.address, "22"]):
        code = ("import socket; s = socket.socket(); s.settimeout(2)\n"
                f"try:\n s.connect(({target[0]!r}, {target[1]}))\nexcept OSError as e:\n"
                " print('unreachable', e)\nelse:\n print('connected')")
        out = rig.hosts[0].run(sys.executable, "-c", code)
        assert out.stdout.startswith("unreachable"), (target, out.stdout, out.stderr)
    # A rig of a killed run is removed by the next one; a finished rig leaves nothing.
    dead = subprocess.Popen(["true"])
    dead.wait()
    subprocess.run(["ip", "netns", "add", f"{NS_PREFIX}{dead.pid}-0-0"], check=True)
    assert f"{NS_PREFIX}{dead.pid}-0-0" in clean_stale()
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert f"{NS_PREFIX}{dead.pid}-0-0" not in listed
    small = HostRig(1)
    assert small.alive == [small.hosts[0].namespace]
    names = [h.namespace for h in small.hosts]
    small.destroy()
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not any(n in listed for n in names)


@pytest.mark.slow
@pytest.mark.matrix
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("hosts", [1, 2, 4])
def test_hailstorm_20000_claims_50_checkers_over_hosts_lose_nothing_and_duplicate_nothing(
        rig: HostRig, server: NetServer, tmp_path: Path, figure: Figure, hosts: int) -> None:
    # 10 processes × 5 threads = 50 checkers, spread round robin over the hosts.
    result = hailstorm(rig, server, tmp_path, hosts=hosts, messages=20_000, processes=10,
                       concurrency=5, work=WORK, lease=10.0, name=f"storm{hosts}",
                       timeout=900)
    figure(**result.figures(), waits=result.waits)
    assert result.drained, result.tail
    assert result.report is not None and result.report.ok, f"{result.report}\n{result.tail}"
    assert result.report.effects == 20_000
    assert sorted(result.effects_by_host) == list(range(hosts))  # every host did work
    assert all(c == 0 for c in result.codes), (result.codes, result.tail)


PROBE = """
import json, os, sys, time
import hailq
from ledger import EffectStore, EffectWriter
url, effects, k = sys.argv[1], sys.argv[2], int(sys.argv[3])
with hailq.connect(url) as broker:
    held = broker.get_queue("hailstorm").receive(max_messages=k, wait=30)
    print(json.dumps([m.id for m in held]), flush=True)
    sys.stdin.readline()  # the link was cut and is back
    for attempt in range(20):  # the first connections after the link returns may fail
        try:
            writer = EffectWriter(EffectStore.from_spec(effects))
            break
        except Exception:
            if attempt == 19:
                raise
            time.sleep(0.5)
    out = []
    for m in held:
        new = writer.apply(m.id, m.body["n"], m.attempt, os.getpid(), time.time())
        try:
            m.ack()
            res = "acked"
        except hailq.LeaseLost:
            res = "refused"
        out.append([m.id, new, res])
    print(json.dumps(out), flush=True)
"""


def read_line(probe: subprocess.Popen[str]) -> str:
    assert probe.stdout is not None
    line = probe.stdout.readline()
    if not line:
        probe.wait(10)
        raise AssertionError(f"the probe failed: {probe.stderr and probe.stderr.read()}")
    return line


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_rule_09_a_host_cut_off_mid_storm_loses_its_leases_and_its_late_acks_are_refused(
        rig: HostRig, server: NetServer, tmp_path: Path, figure: Figure) -> None:
    """Three hosts; once host 0 is at work, it goes off the network for 4 leases. Its
    claims are received again on hosts 1 and 2; when it is back, its acks of them are
    refused (a probe process on host 0 leases 5 claims just before the cut to show it
    message by message; its workers log their refused acks and lost leases), and no
    message took effect twice."""
    cut_host, hosts, messages, down_for = 0, 3, 6000, 4 * LEASE
    host = rig.hosts[cut_host]
    effects = f"{server.url_for(host.server_address)}#cut_fx"
    probes: list[subprocess.Popen[str]] = []
    state: dict[str, float] = {}
    held: list[str] = []
    answers: list[list[object]] = []

    def cut_and_restore(elapsed: float, workers: HostWorkers) -> None:
        if "cut" not in state and done_on(workers.pids_of(cut_host)) >= 20:
            # Host 0 is at work. A probe there leases 5 claims, then the link goes down.
            probe = subprocess.Popen(
                host.command(sys.executable, "-c", PROBE,
                             server.url_for(host.server_address, schema="cut"), effects, "5"),
                env=worker_env(effects), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True)
            probes.append(probe)
            held.extend(json.loads(read_line(probe)))
            rig.cut(cut_host)
            state["cut"] = time.time()
        elif "cut" in state and "back" not in state and time.time() - state["cut"] > down_for:
            rig.restore(cut_host)
            state["back"] = time.time()
        elif "back" in state and not answers and done_elsewhere():
            probe = probes[0]
            assert probe.stdin is not None
            probe.stdin.write("go\n")  # now it acks what it leased before the cut
            probe.stdin.flush()
            answers.extend(json.loads(read_line(probe)))

    def done_on(pids: set[int]) -> int:
        """Effects written so far by these worker processes."""
        return int(str(server.psql("SELECT count(*) FROM cut_fx.effects WHERE pid IN "
                                   f"({', '.join(map(str, pids))})")[0][0]))

    def done_elsewhere() -> bool:
        found = server.psql("SELECT count(DISTINCT message_id) FROM cut_fx.effects "
                            f"WHERE message_id IN ({', '.join(repr(i) for i in held)})")
        return found[0][0] == len(held)

    try:
        result = hailstorm(rig, server, tmp_path, hosts=hosts, messages=messages,
                           processes=6, concurrency=4, work=WORK, lease=LEASE, name="cut",
                           timeout=600, url_options={"timeout": 20},
                           during=cut_and_restore)
        assert "back" in state, f"the storm ended before the link came back: {state}"
        assert answers, "the storm ended before the probe's claims took effect elsewhere"
        probes[0].wait(30)
    finally:
        rig.restore(cut_host)  # whatever happened
        for probe in probes:
            if probe.poll() is None:
                probe.kill()
                probe.wait(10)
    stats = result.stats
    assert stats is not None and result.report is not None
    late = result.log_counts[cut_host]
    figure(**result.figures(), cut_seconds=round(state["back"] - state["cut"], 1),
           probe=[a[2] for a in answers], **late, effects_by_host=result.effects_by_host)
    assert result.drained, result.tail
    # Lost 0, duplicate effects 0: the checker counts effects, repeats included.
    assert result.report.ok, f"{result.report}\n{result.tail}"
    assert result.report.effects == messages
    # Its leases ended and the other hosts received its claims again.
    assert stats.redelivered >= len(held) == 5
    by_id = {r[0]: r for r in result.rows}
    for message_id in held:
        assert by_id[message_id][3] in (1, 2), (message_id, by_id[message_id])
    # The other hosts kept working while host 0 was away.
    during_cut = [r for r in result.rows if state["cut"] + 1 < r[2] < state["back"]]
    assert {r[3] for r in during_cut} >= {1, 2}, result.effects_by_host
    # Back on the network, host 0's acks of those messages are refused (rule 9), and
    # the inbox saw them already: no second effect.
    assert [a[0] for a in answers] == held
    assert all(a[2] == "refused" for a in answers), answers
    assert not any(a[1] for a in answers), answers
    # Host 0's workers were fenced as well: each message they held at the cut was
    # received again elsewhere; their acks and outcomes for it were refused.
    assert late["refused_acks"] + late["lost_outcomes"] + late["lost_leases"] >= 1, (
        late, result.tail)
    assert all(c == 0 for c in result.codes), (result.codes, result.tail)
