"""Durations and the clock."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from hailq.errors import InvalidArgument

Clock = Callable[[], float]
"""A function returning the current time in seconds since the epoch."""

system_clock: Clock = time.time

Duration = float | int | timedelta


def seconds(value: Duration | None, what: str, *, allow_zero: bool = True,
            maximum: float = 10 * 365 * 86400.0) -> float:
    """Normalise a duration given as seconds or ``timedelta``; reject bad values."""
    if (type(value) is int or type(value) is float) and (
            0 < value <= maximum or (value == 0 and allow_zero)):
        return float(value)  # the common case, before the general checks below
    if isinstance(value, bool) or value is None:
        raise InvalidArgument(f"{what} must be seconds (int/float) or a timedelta, got {value!r}")
    if isinstance(value, timedelta):
        result = value.total_seconds()
    elif isinstance(value, int | float):
        result = float(value)
    else:
        raise InvalidArgument(
            f"{what} must be seconds (int/float) or a timedelta, got {type(value).__name__}")
    if math.isnan(result) or math.isinf(result):
        raise InvalidArgument(f"{what} must be a finite number of seconds, got {value!r}")
    if result < 0 or (result == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise InvalidArgument(f"{what} must be {bound} seconds, got {span(result)}")
    if result > maximum:
        raise InvalidArgument(f"{what} must be at most {span(maximum)}, got {span(result)}")
    return result


_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def text_seconds(value: object, what: str, **limits: Any) -> float:
    """``seconds`` that also reads a duration written as text: "90s", "15m", "24h",
    "7d" (a number and one unit), as a setting's value may be given."""
    if isinstance(value, str):
        text = value.strip().lower()
        try:
            value = float(text[:-1]) * _UNITS[text[-1:]]
        except (KeyError, ValueError):
            raise InvalidArgument(f'{what} must be seconds or a duration such as "90s", '
                                  f'"15m", "24h" or "7d", got {value!r}') from None
    return seconds(value, what, **limits)  # type: ignore[arg-type]


def span(value: float) -> str:
    """Seconds for a person to read: ``2592000 seconds (30 days)``, never ``2.592e+06``."""
    text = f"{value:.15g} seconds"
    if abs(value) >= 86400:
        text += f" ({value / 86400:.4g} days)"
    return text


def format_age(seconds: float | None, *, spaced: bool = False) -> str:
    """A duration as a person reads it; ``-`` for none.

    Terse (the CLI's columns): 42s, 3m07s, 2h05m, 4d03h. ``spaced`` (the live view, which
    also shows short waits finely): 850ms, 4.2s, 12s, 4m 05s, 3h 20m, 2d 4h.
    """
    if seconds is None or math.isnan(seconds):
        return "-"
    if spaced and seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    s = max(int(seconds), 0)
    if s < 60:
        if not spaced:
            return f"{s}s"
        return f"{seconds:.0f}s" if s >= 10 else f"{seconds:.1f}s"
    gap = " " if spaced else ""
    if s < 3600:
        return f"{s // 60}m{gap}{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{gap}{s % 3600 // 60:02d}m"
    hours = s % 86400 // 3600
    return f"{s // 86400}d{gap}{hours}h" if spaced else f"{s // 86400}d{hours:02d}h"
