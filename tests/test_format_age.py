"""The one duration formatter, in the CLI's terse style and the live view's spaced one."""

from __future__ import annotations

import math

import pytest

from hailq._time import format_age
from hailq.cli.output import age as cli_age
from hailq.serve.dashboard import age as page_age


@pytest.mark.parametrize(("seconds", "terse", "spaced"), [
    (None, "-", "-"),
    (math.nan, "-", "-"),
    (0.85, "0s", "850ms"),
    (4.2, "4s", "4.2s"),
    (42, "42s", "42s"),
    (187, "3m07s", "3m 07s"),
    (2 * 3600 + 5 * 60, "2h05m", "2h 05m"),
    (4 * 86400 + 3 * 3600, "4d03h", "4d 3h"),
    (-5, "0s", "-5000ms"),
])
def test_terse_and_spaced(seconds: float | None, terse: str, spaced: str) -> None:
    assert format_age(seconds) == cli_age(seconds) == terse
    assert format_age(seconds, spaced=True) == page_age(seconds) == spaced
