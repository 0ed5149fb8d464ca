"""When a periodic schedule is due (SPEC rule 35): pure functions, no database.

A slot is a moment a schedule fires, in epoch seconds. An interval schedule
(``every=300``) has a slot at every multiple of its interval since the epoch, so
every scheduler computes the same slots. A cron schedule walks the expression in
the schedule's wall-clock time (``zoneinfo``) and maps each wall time to a moment
the way cron users expect across daylight saving changes:

- a wall time the spring change skips (02:30 when clocks jump from 02:00 to
  03:00) fires once, at the change; several such times are one slot;
- a wall time that occurs twice in the autumn (01:30 when clocks go back from
  02:00 to 01:00) fires once, at its first occurrence.

``due`` answers which slots to send now: the slots after the last one sent and
not after now; by default only the latest of them (a scheduler that was down
sends the slot it missed last, once, not a burst), with ``catch_up=N`` also up
to N missed slots before it.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from hailq.errors import InvalidArgument

_UTC = UTC
_MAX_STEPS = 100_000  # cron slots walked per question at most


def check_cron(expression: object) -> str:
    """``expression`` if it is a valid 5-field cron expression, else InvalidArgument."""
    if not isinstance(expression, str) or len(expression.split()) != 5 \
            or not croniter.is_valid(expression):
        raise InvalidArgument(
            f"cron must be a 5-field cron expression such as \"*/5 * * * *\" (minute hour "
            f"day-of-month month day-of-week), got {expression!r}")
    return expression


@lru_cache(maxsize=64)
def zone(name: object) -> ZoneInfo:
    """The ``zoneinfo`` zone ``name`` (e.g. "Europe/Berlin"), else InvalidArgument."""
    if not isinstance(name, str) or not name:
        raise InvalidArgument(f"timezone must be a zone name such as \"Europe/Berlin\", "
                              f"got {name!r}")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidArgument(f"unknown timezone {name!r}: use a name from the tz database, "
                              "such as \"UTC\" or \"America/New_York\"") from None


def moment(wall: datetime, tz: ZoneInfo) -> float:
    """The epoch seconds of naive wall-clock time ``wall`` in ``tz``, as cron fires it: a
    skipped wall time at the change, a repeated one at its first occurrence."""
    first = wall.replace(tzinfo=tz, fold=0)
    if first.astimezone(_UTC).astimezone(tz).replace(tzinfo=None) == wall:
        return first.timestamp()  # it exists (its first occurrence, where there are two)
    # Skipped: the change is the first moment whose wall time is later than ``wall``.
    # fold=1 reads the wall time with the offset after the change: a moment before it.
    low = wall.replace(tzinfo=tz, fold=1).timestamp()
    high = first.timestamp()
    while high - low > 1.0:
        middle = (low + high) / 2
        local = datetime.fromtimestamp(middle, tz).replace(tzinfo=None)
        if local < wall:
            low = middle
        else:
            high = middle
    return float(math.ceil(high))


def _wall(at: float, tz: ZoneInfo) -> datetime:
    return datetime.fromtimestamp(at, tz).replace(tzinfo=None)


def next_slot(cron: str | None, every: float | None, tz_name: str, after: float) -> float:
    """The first slot later than ``after``."""
    if every is not None:
        return (math.floor(after / every) + 1) * every
    assert cron is not None
    tz = zone(tz_name)
    walk = croniter(cron, _wall(after, tz) - timedelta(hours=3))
    for _ in range(_MAX_STEPS):
        slot = moment(walk.get_next(datetime), tz)
        if slot > after:
            return slot
    raise InvalidArgument(f"cron {cron!r} has no slot after {after}")  # pragma: no cover


def due(cron: str | None, every: float | None, tz_name: str, last: float, now: float,
        catch_up: int = 0) -> list[float]:
    """The slots to send now, oldest first: those in ``(last, now]``, at most the latest
    ``catch_up + 1`` of them."""
    keep = catch_up + 1
    if now <= last:
        return []
    if every is not None:
        newest = math.floor(now / every) * every
        oldest = max(math.floor(last / every) + 1, math.floor(now / every) - keep + 1)
        return [k * every for k in range(int(oldest), int(newest / every) + 1)
                if last < k * every <= now]
    assert cron is not None
    tz = zone(tz_name)
    # Walk back from now in wall time (one hour past it, for the autumn's repeated hour).
    walk = croniter(cron, _wall(now, tz) + timedelta(hours=1, seconds=1))
    found: set[float] = set()
    for _ in range(_MAX_STEPS):
        slot = moment(walk.get_prev(datetime), tz)
        if slot <= last - 7200:  # well before the last slot sent (DST moves by an hour)
            break
        if last < slot <= now:
            found.add(slot)
        if len(found) >= keep and slot < sorted(found)[-keep] - 7200:
            break
    return sorted(found)[-keep:]
