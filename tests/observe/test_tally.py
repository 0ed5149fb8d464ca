"""A recorder's tally between flushes (rules 25, 26, 36): what a flush writes."""

from __future__ import annotations

from hailq.backends.base import FiguresRecordParams, RateAdd
from hailq.observe.histogram import bounds_for
from hailq.observe.tally import Tally, params


def test_a_flush_that_failed_is_written_again_with_every_counter_in_place() -> None:
    """A recorder whose flush failed adds the rows it could not write to the next one
    (``tally.params``): each counter of a priority's rates keeps its name."""
    row = RateAdd(queue="claims", priority=9, started=7, acked=5, failed=2, breaches=3,
                  handler_total=1.5, redelivered=1, inbox=4, late_acks=6)
    assert params({}, [], FiguresRecordParams(rates=[row])).rates == [row]
    fresh = Tally(bounds_for({9: 2.0}), 2.0)
    fresh.waits([3.0], redelivered=1)  # one claim, past its target, redelivered
    fresh.ends([0.5], failed=0, inbox=1, late=1)  # its ack
    (both,) = params({("claims", 9): fresh}, [], FiguresRecordParams(rates=[row])).rates
    assert both == RateAdd(queue="claims", priority=9, started=8, acked=6, failed=2,
                           breaches=4, handler_total=2.0, redelivered=2, inbox=5, late_acks=7)
