"""Every table the CLI prints fits 80 and 100 columns without splitting a name, an id
or a figure (issue 33, point 8): what people copy appears whole on one line."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any

import pytest
from rich.cells import cell_len
from rich.console import Console

import hailq
from hailq.cli.output import key, make_table, text
from hailq.internal import ops

from .conftest import Result, run_hailq

QUEUE = "notify-email-transactional-eu-west-1"
OTHER = "billing.invoices:priority-high-volume-2026"
TOPIC = "customer-events-eu-west-1"
SUBSCRIPTIONS = ["customer-events-audit-log-archive", "customer-events-search-indexer"]
SCHEDULE = "nightly-invoice-reminder-for-overdue-accounts"
WORKER = "worker-host-eu-west-1a.internal:48213:9f3c2a1b"
AUTOSCALER_HOST = "autoscaler-eu-west-1.internal"
ORDERING_KEY = "customer-0042-9917"
ERROR = ("Traceback (most recent call last):\n  ...\nValueError: the customer record "
         "customer-0042-9917 has no e-mail address on file, so no reminder can be sent")
ID_RE = re.compile(r"\b[0-9A-Z]{26}\b")
WIDTHS = [80, 100]


def arrange(broker: hailq.Broker) -> dict[str, Any]:
    """Long names and real ids everywhere a table shows them."""
    q = broker.queue(QUEUE, max_attempts=1, slo={9: 10, 0: 60})
    dead = [q.send({"customer": n, "note": "reminder " * 8}, priority=9,
                   ordering_key=ORDERING_KEY if n == 0 else None) for n in range(3)]
    for _ in dead:
        (message,) = q.receive()
        message.nack(error=ERROR)
    other = broker.queue(OTHER, rate="50/s")
    live = [other.send({"invoice": n}, priority=n % 10, ordering_key=ORDERING_KEY)
            for n in range(3)]
    topic = broker.topic(TOPIC)
    for name in SUBSCRIPTIONS:
        topic.subscribe(name, filter={"region": "eu-west-1"})
    broker.schedule("*/5 * * * *", queue=OTHER, body={"remind": "overdue"}, name=SCHEDULE,
                    timezone="Europe/Amsterdam")
    ops(broker).save_worker(hailq.WorkerInfo(
        id=WORKER, host="worker-host-eu-west-1a.internal", pid=48213, queues=[QUEUE, OTHER],
        concurrency=8, in_flight=3, started_at=time.time() - 7200, last_seen=0.0,
        state="running"))
    for n in range(2):
        ops(broker).record_autoscale(hailq.AutoscalerInfo(
            id=f"{AUTOSCALER_HOST}:4242:{QUEUE}", queue=QUEUE, host=AUTOSCALER_HOST,
            pid=4242, workers=3 + n, desired=4, decision="grow",
            reason="backlog 1,234 at 56.20/s needs 4 workers for the 10s target of "
                   "priority 9", at=0.0, ceiling=6, minimum=1, maximum=12,
            throughput=56.2, handler_time=0.0712))
    return {"dead": dead, "live": live}


def commands(ids: dict[str, Any]) -> list[tuple[list[str], list[str], int | None]]:
    """(arguments, what must appear whole, rows the table has or None if not checked)."""
    return [
        (["queues"], [QUEUE, OTHER, *SUBSCRIPTIONS], 4),
        (["stats"], [QUEUE, OTHER, f"{AUTOSCALER_HOST}:4242"], None),
        (["stats", QUEUE], [QUEUE], None),
        (["dead", QUEUE], ids["dead"], 3),
        (["redrive", QUEUE, "--dry-run"], ids["dead"], 3),
        (["peek", OTHER], ids["live"], 3),
        (["show", QUEUE, ids["dead"][0]], [ids["dead"][0], ORDERING_KEY], None),
        (["configure", QUEUE], [], None),
        (["topics"], [TOPIC, *SUBSCRIPTIONS], 2),
        (["workers"], [WORKER], 1),
        (["schedules"], [SCHEDULE, OTHER], 1),
    ]


def first_header(args: list[str]) -> str:
    return {"queues": "QUEUE ", "topics": "TOPIC ", "schedules": "NAME "}.get(args[0], "ID ")


def assert_fits(result: Result, width: int, whole: list[str], rows: int | None,
                args: list[str] | None = None) -> None:
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    too_wide = [line for line in lines if cell_len(line) > width]
    assert not too_wide, f"wider than {width}:\n" + "\n".join(too_wide)
    for token in whole:
        assert any(token in line for line in lines), f"{token} not whole in:\n{result.out}"
    if rows is not None:  # one line per row (or per field of a block): nothing split
        body = [line for line in lines if line.startswith("│")]
        if not body:  # too narrow for a table: a block per row, each field on one line
            body = [line for line in lines if line.startswith(first_header(args or []))]
        assert len(body) == rows, result.out


@pytest.mark.parametrize("width", WIDTHS)
def test_every_table_fits_without_splitting_names_ids_or_figures(
        url: str, api_any: hailq.Broker, width: int) -> None:
    ids = arrange(api_any)
    for args, whole, rows in commands(ids):
        result = run_hailq(*args, url=url, env={"COLUMNS": str(width)})
        assert_fits(result, width, whole, rows, args)
        if args[0] == "dead":  # an id copied from the table finds its message
            copied = ID_RE.findall(result.out)
            assert copied == ids["dead"]
            shown = run_hailq("show", QUEUE, copied[-1], "--json", url=url)
            assert shown.json()["id"] == ids["dead"][-1]
    published = run_hailq("publish", TOPIC, '{"n": 1}', "-H", "region=eu-west-1", url=url,
                          env={"COLUMNS": str(width)})
    assert_fits(published, width, SUBSCRIPTIONS, 2)
    shown = set(ID_RE.findall(published.out))
    assert len(shown) == 2
    assert shown == {m.id for name in SUBSCRIPTIONS for m in api_any.get_queue(name).peek(5)}


def test_a_left_out_column_is_named_and_in_json(hq_any: Any, api_any: hailq.Broker) -> None:
    arrange(api_any)
    narrow = hq_any("queues", env={"COLUMNS": "80"})
    assert_fits(narrow, 80, [QUEUE, OTHER], 4)
    assert "left out to fit 80 columns:" in narrow.out and "RATE" in narrow.out
    assert "50/s" not in narrow.out
    wide = hq_any("queues", env={"COLUMNS": "200"})
    assert "50/s" in wide.out and "left out" not in wide.out
    (other,) = [q for q in hq_any("queues", "--json").json() if q["queue"] == OTHER]
    assert other["settings"]["rate"] == "50/s"


def test_a_name_too_long_for_any_table_is_cut_and_whole_in_json(
        hq_any: Any, api_any: hailq.Broker) -> None:
    name = "q" + "-very-long-name" * 8  # 121 characters: wider than the terminal
    message_id = api_any.queue(name).send({"n": 1})
    result = hq_any("queues", env={"COLUMNS": "80"})
    assert_fits(result, 80, [], None)
    assert name not in result.out and name[:40] in result.out and "…" in result.out
    assert [q["queue"] for q in hq_any("queues", "--json").json()] == [name]
    peeked = hq_any("peek", name, env={"COLUMNS": "80"})
    assert_fits(peeked, 80, [message_id], 1)


def render(table: Any, width: int) -> list[str]:
    console = Console(width=width, file=open(os.devnull, "w"), highlight=False)  # noqa: SIM115
    with console.capture() as captured:
        console.print(table)
    return captured.get().splitlines()


def test_a_table_that_fits_no_way_becomes_one_block_per_row() -> None:
    ids = ["01M9530JPX3S72R8F4EAS53DB7", "01M9530JPY3FQ2JGAKFENYR59P"]
    table = make_table([key("ID"), key("WHERE"), "FIGURE", text("NOTE")],
                       [[i, "x" * 50, 12.5, "a note " * 20] for i in ids])
    lines = render(table, 80)
    assert all(cell_len(line) <= 80 for line in lines)
    assert not any(line.startswith("│") for line in lines)
    for i in ids:
        assert [line.split() for line in lines if i in line] == [["ID", i]]
    assert sum(line.split() == ["FIGURE", "12.5"] for line in lines) == 2


def test_free_text_takes_the_width_left_and_is_cut_with_an_ellipsis() -> None:
    table = make_table([key("ID"), text("ERROR")], [["01M9530JPX3S72R8F4EAS53DB7", "e" * 200]])
    for width in WIDTHS:
        (row,) = [line for line in render(table, width) if line.startswith("│")]
        assert cell_len(row) == width and row.rstrip(" │").endswith("e…")


def test_tables_fit_a_real_terminal(sqlite_url: str, tmp_path: Path) -> None:
    """On a terminal the width is the terminal's (no COLUMNS): 80 columns, names whole."""
    import fcntl
    import pty
    import struct
    import subprocess
    import sys
    import termios

    with hailq.connect(sqlite_url) as broker:
        arrange(broker)
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 80, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("HAILQ_URL", "COLUMNS")}
    done = subprocess.run([sys.executable, "-m", "hailq.cli.main", "queues", "--url",
                           sqlite_url], stdout=follower, stderr=subprocess.PIPE, env=env,
                          timeout=120)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert done.returncode == 0, done.stderr
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", b"".join(chunks).decode())
    assert_fits(Result(0, plain.replace("\r\n", "\n"), ""), 80, [QUEUE, OTHER], 4)
