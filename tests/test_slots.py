"""Rule 35's slots as pure functions (hailq/policy/slots.py): no database, no clock."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from hailq import InvalidArgument
from hailq.policy import slots

NY = ZoneInfo("America/New_York")  # spring 2026-03-08 02:00 -> 03:00, autumn 11-01 02:00 -> 01:00


def at(*wall: int, tz: ZoneInfo = NY, fold: int = 0) -> float:
    return datetime(*wall, tzinfo=tz, fold=fold).timestamp()  # type: ignore[misc]


def local(moments: list[float], tz: ZoneInfo = NY) -> list[str]:
    return [datetime.fromtimestamp(m, tz).strftime("%m-%d %H:%M %Z") for m in moments]


def test_interval_slots_are_multiples_of_the_interval_so_every_scheduler_agrees() -> None:
    assert slots.next_slot(None, 300, "UTC", 1000.0) == 1200.0
    assert slots.next_slot(None, 300, "UTC", 1200.0) == 1500.0
    assert slots.due(None, 300, "UTC", last=1000.0, now=1199.0) == []
    assert slots.due(None, 300, "UTC", last=1000.0, now=1200.0) == [1200.0]


def test_after_downtime_only_the_latest_missed_slot_is_due_unless_catch_up_allows_more() -> None:
    assert slots.due(None, 60, "UTC", last=0.0, now=600.0) == [600.0]
    assert slots.due(None, 60, "UTC", last=0.0, now=600.0, catch_up=2) == [480.0, 540.0, 600.0]
    assert slots.due(None, 60, "UTC", last=450.0, now=600.0, catch_up=10) == [480.0, 540.0,
                                                                              600.0]
    hourly = slots.due("0 * * * *", None, "UTC", last=at(2026, 5, 1, 0, 30, tz=ZoneInfo("UTC")),
                       now=at(2026, 5, 1, 6, 10, tz=ZoneInfo("UTC")), catch_up=2)
    assert local(hourly, ZoneInfo("UTC")) == ["05-01 04:00 UTC", "05-01 05:00 UTC",
                                              "05-01 06:00 UTC"]


def test_cron_runs_in_its_time_zone() -> None:
    berlin = ZoneInfo("Europe/Berlin")
    nine = slots.next_slot("0 9 * * *", None, "Europe/Berlin", at(2026, 6, 1, 12, tz=berlin))
    assert local([nine], berlin) == ["06-02 09:00 CEST"]


def test_a_time_the_spring_change_skips_fires_once_at_the_change() -> None:
    daily = slots.due("30 2 * * *", None, "America/New_York", last=at(2026, 3, 7, 12),
                      now=at(2026, 3, 9, 12), catch_up=5)
    assert local(daily) == ["03-08 03:00 EDT", "03-09 02:30 EDT"]
    half_hourly = slots.due("*/30 * * * *", None, "America/New_York",
                            last=at(2026, 3, 8, 1, 10), now=at(2026, 3, 8, 3, 40), catch_up=10)
    # 02:00 and 02:30 do not exist: they and 03:00 are one slot, at the change.
    assert local(half_hourly) == ["03-08 01:30 EST", "03-08 03:00 EDT", "03-08 03:30 EDT"]


def test_a_time_the_autumn_change_repeats_fires_once_at_its_first_occurrence() -> None:
    start = at(2026, 11, 1, 0, 50)
    daily = slots.due("30 1 * * *", None, "America/New_York", last=start,
                      now=start + 4 * 3600, catch_up=5)
    assert local(daily) == ["11-01 01:30 EDT"]
    # A scheduler that looks during the repeated hour finds nothing new to send.
    assert slots.due("30 1 * * *", None, "America/New_York", last=daily[0],
                     now=at(2026, 11, 1, 1, 45, fold=1)) == []
    assert local([slots.next_slot("30 1 * * *", None, "America/New_York", daily[0])]) == [
        "11-02 01:30 EST"]


def test_bad_cron_expressions_and_zones_are_invalid_arguments() -> None:
    for bad in ("bad", "* * * *", "61 * * * *", "* * * * * *", 5):
        with pytest.raises(InvalidArgument, match="cron"):
            slots.check_cron(bad)
    for zone in ("Mars/Olympus", "", None):
        with pytest.raises(InvalidArgument, match="timezone"):
            slots.zone(zone)
