"""Retry backoff after a failed attempt."""

from __future__ import annotations

import random

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
