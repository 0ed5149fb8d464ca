"""``hailq top``: every queue on one screen of 80 columns, both backends."""

from __future__ import annotations

import hailq

from .conftest import Hailq, kill_messages

LONG = "notify-email-with-a-very-long-queue-name-indeed"


def test_one_screen_fits_80_columns_with_every_queue(hq_any: Hailq,
                                                      api_any: hailq.Broker) -> None:
    api_any.queue("claims").send_many(list(range(1_500)))
    mail = api_any.queue(LONG)
    mail.send_many(list(range(5)))
    mail.receive(max_messages=2, lease=60)
    kill_messages(api_any, "poison", [1], ["boom"])
    api_any.get_queue("claims").pause()
    shown = hq_any("top", "--once")
    assert shown.code == 0, shown.err
    lines = shown.out.splitlines()
    assert all(len(line) <= 80 for line in lines), lines
    rows = {line.split()[0]: line.split()[1:] for line in lines[2:]}
    assert rows["claims"][:4] == ["‖", "1k+", "0", "0"]  # paused, counts past 1,000 capped
    assert rows["poison"][:3] == ["0", "0", "1"]
    [cut] = [name for name in rows if name.startswith("notify-email")]
    assert cut.endswith("…") and rows[cut][:3] == ["3", "2", "0"]  # cut, never wrapped


def test_top_only_reads(hq: Hailq, tmp_path: object) -> None:
    # No database at the URL: an error, and nothing is created.
    missing = hq("top", "--once", url="sqlite:////nonexistent/dir/hailq.db")
    missing.assert_clean_error()
