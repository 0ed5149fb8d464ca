"""``hailq schedules`` (list, pause, resume, remove) and ``hailq scheduler`` (rule 35)."""

from __future__ import annotations

import hailq

from .conftest import Hailq


def test_schedules_lists_pauses_resumes_and_removes(hq_any: Hailq,
                                                    api_any: hailq.Broker) -> None:
    api_any.schedule("*/5 * * * *", queue="reports", body={"report": "sales"},
                     name="sales", timezone="Europe/Berlin")
    api_any.schedule(every=300, queue="pings", body="ping", name="ping")

    listing = {s["name"]: s for s in hq_any("schedules", "--json").json()}
    assert listing["sales"]["cron"] == "*/5 * * * *"
    assert listing["sales"]["timezone"] == "Europe/Berlin"
    assert listing["ping"]["every"] == 300.0
    assert {s["status"] for s in listing.values()} == {"active"}

    assert hq_any("schedules", "pause", "sales").code == 0
    assert api_any.get_schedule("sales").paused
    table = hq_any("schedules").out
    for text in ("sales", "*/5 * * * *", "Europe/Berlin", "paused", "ping", "every 300s"):
        assert text in table
    assert hq_any("schedules", "resume", "sales").code == 0
    assert not api_any.get_schedule("sales").paused
    assert hq_any("schedules", "delete", "sales").code == 0
    assert [s.name for s in api_any.schedules()] == ["ping"]

    error = hq_any("schedules", "pause", "sales").assert_clean_error(1)
    assert "no schedule named 'sales'" in error


def test_an_app_schedule_nobody_declares_is_shown_as_such(hq: Hailq,
                                                         api: hailq.Broker) -> None:
    from hailq.schedule import periodic

    gone = periodic(every=60, queue="pings", body="ping", name="ping")
    api.backend.schedule_save(gone.save_params("app", api.now() - 3600))
    assert "not declared by any running worker" in hq("schedules").out
    assert hq("schedules", "--json").json()[0]["declared"] is False


def test_schedules_on_an_empty_database_says_how_to_make_one(hq: Hailq,
                                                             api: hailq.Broker) -> None:
    assert "app.periodic" in hq("schedules").out
