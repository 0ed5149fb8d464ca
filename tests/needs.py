"""Tests that need a tool or service which ``.ci/run`` installs.

Where it is missing they skip with the reason on a developer's machine, and fail
in CI (``CI=true``), which installs everything and must never skip them.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

IN_CI = os.environ.get("CI", "").lower() == "true"


def unavailable(problem: str, needed_for: str) -> NoReturn:
    """Skip with ``problem``, or fail in CI, naming the tests ``needed_for`` it."""
    if IN_CI:
        pytest.fail(f"{problem}; CI=true requires {needed_for}", pytrace=False)
    pytest.skip(problem)
