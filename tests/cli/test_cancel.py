"""``hailq cancel ID`` (rule 40): a waiting message never starts, a running one is
marked for its worker to stop, an unknown one exits 1 and changes nothing."""

from __future__ import annotations

import hailq

from .conftest import Hailq


def test_cancel_a_waiting_message_by_id_alone_and_a_running_one_by_queue(
        hq_any: Hailq, api_any: hailq.Broker) -> None:
    claims = api_any.queue("claims", lease=30)
    waiting = claims.send({"claim": 1}, delay=3600)
    running = claims.send({"claim": 2})
    [message] = claims.receive()
    assert hq_any("cancel", waiting).out.strip() == \
        f"cancelled message {waiting}: it was waiting and never starts"
    assert hq_any("cancel", running, "--queue", "claims", "--json").json() == {
        "id": running, "cancelled": "running"}
    shown = claims.get_message(running)
    assert shown is not None and shown.state == "cancelled"
    assert claims.get_message(waiting) is None
    assert "cancelled" in hq_any("show", "claims", running).out
    assert message.id == running


def test_cancel_of_an_unknown_or_finished_message_exits_1_and_changes_nothing(
        hq_any: Hailq, api_any: hailq.Broker) -> None:
    claims = api_any.queue("claims", lease=30)
    acked = claims.send({"claim": 1})
    claims.receive()[0].ack()
    kept = claims.send({"claim": 2})
    line = hq_any("cancel", acked).assert_clean_error(1)
    assert acked in line and "nothing was cancelled" in line
    hq_any("cancel", acked, "-q", "claims").assert_clean_error(1)
    hq_any("cancel", "not-an-id").assert_clean_error(2)
    hq_any("cancel", kept, "-q", "bad name!").assert_clean_error(2)
    assert [m.id for m in claims.receive()] == [kept]
