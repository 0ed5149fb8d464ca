"""``hailq doctor`` from Python (rules 26, 36): read what the doctor reads of each queue
over a recent window and diagnose it. The CLI command is this plus printing; the
diagnosis itself is pure (``hailq/policy/diagnosis.py``)."""

from __future__ import annotations

from collections.abc import Sequence

from hailq._time import Duration, seconds
from hailq.backends.base import DeadListParams, FiguresWindowParams
from hailq.broker import Broker
from hailq.errors import InvalidArgument
from hailq.policy.diagnosis import (
    DEFAULT_SINCE,
    MAX_SINCE,
    MIN_SINCE,
    Diagnosis,
    Thresholds,
    diagnose,
    evidence_of,
    reach,
    window_text,
)

DEAD_LETTERS_READ = 1000  # the newest dead letters read per queue for poison messages


def examine(broker: Broker, queues: Sequence[str] | None = None,
            since: Duration = DEFAULT_SINCE, thresholds: Thresholds | None = None
            ) -> list[Diagnosis]:
    """Diagnose ``queues`` (default: every queue) over the last ``since`` seconds (from
    10 seconds to a day; a ``timedelta`` too). Reads only; QueueNotFound for a queue
    never declared, InvalidArgument for a bad window."""
    window = seconds(since, "since")
    if not MIN_SINCE <= window <= MAX_SINCE:
        raise InvalidArgument(f"since must be from {window_text(MIN_SINCE)} to "
                              f"{window_text(MAX_SINCE)}, got {window:g} seconds")
    chosen = [broker.get_queue(name) for name in queues] if queues else broker.queues()
    workers = broker.workers()
    results = []
    for q in chosen:
        figures = q.figures()
        rows = broker.backend.figures_window(FiguresWindowParams(q.name,
                                                                 reach(figures, window)))
        # The newest: a window's dead letters are read however many older ones the
        # queue keeps (those are a note; the oldest past the limit are not read). The
        # evidence lists them oldest first, as ``hailq dead`` does.
        newest = broker.backend.dead_list(DeadListParams(q.name, limit=DEAD_LETTERS_READ,
                                                         newest_first=True))
        evidence = evidence_of(figures, newest[::-1], workers, since=window, window=rows)
        results.append(diagnose(evidence, thresholds))
    return results
