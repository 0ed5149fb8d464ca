"""Retry backoff after a failed attempt."""

from __future__ import annotations

import json
import random
from functools import lru_cache

from hailq.settings import RetryPolicy


def backoff(policy: RetryPolicy, attempt: int, rand: random.Random | None = None) -> float:
    """Seconds to wait before attempt ``attempt + 1`` after attempt ``attempt`` failed.

    Grows ``base * factor**(attempt-1)``, capped at ``max``; ``jitter`` takes a
    random share off so that many failures at once do not come back at once.
    """
    exponent = max(attempt - 1, 0)
    try:
        delay = policy.base * policy.factor ** exponent
    except OverflowError:
        delay = policy.max
    delay = min(delay, policy.max)
    if policy.jitter:
        delay *= 1.0 - policy.jitter * (rand or random).random()
    return delay


@lru_cache(maxsize=256)
def _policy(stored: str | None) -> RetryPolicy:
    return RetryPolicy() if stored is None else RetryPolicy(**json.loads(stored))


def stored_backoff(stored: str | None, attempt: int | None) -> float:
    """``backoff`` of a retry policy as a queue's row stores it (JSON; None: the
    defaults): SQLite's ``hailq_backoff``, so that a nack reads the live policy where
    it runs (rule 39). PostgreSQL's ``backoff`` function (migration 12) says the same."""
    return 0.0 if attempt is None else backoff(_policy(stored), int(attempt))
