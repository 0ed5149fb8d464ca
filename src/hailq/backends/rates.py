"""Rate limits (SPEC rule 33), the storage side: a token bucket row per limited queue.

A claim of a rate-limited queue takes ``min(n, whole tokens)`` from the queue's bucket
in its own transaction (``rate_take``: on PostgreSQL the upsert locks the row until the
claim commits, so the claims of a limited queue take turns; unlimited queues never touch
the table), leases at most that many and gives back what it found no message for. The
bucket refills at the queue's rate up to its burst, on the database's clock. A receiver
whose queues are all out of tokens sleeps until the next one is due (``starved``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from hailq.backends.base import ClaimedRow
from hailq.backends.dialect import Tx
from hailq.settings import QueueSettings


def save_args(name: str, settings: Mapping[str, Any]) -> dict[str, Any]:
    """The columns ``queue_rate_save`` stores from a queue's settings (as JSON data)."""
    known = QueueSettings(rate=settings.get("rate"), burst=settings.get("burst"))
    return {"name": name, "rate": known.rate_per_second, "burst": known.bucket}


def live(tx: Tx, queue: str) -> tuple[float | None, float]:
    """The queue's stored limit: messages per second (None: no limit) and bucket size."""
    found = tx.one("queue_rate", {"queue": queue})
    if found is None or found[0] is None:
        return None, 0.0
    return float(found[0]), float(found[1])


def claim(tx: Tx, queue: str, n: int, rate: float, burst: float,
          lease: Callable[[int], list[ClaimedRow]]) -> list[ClaimedRow]:
    """Take up to ``n`` tokens, lease as many messages, give back the tokens left over.
    Runs inside the claim's transaction."""
    taken = int(tx.one("rate_take", {"queue": queue, "n": n, "rate": rate,
                                     "burst": burst, "now": tx.now})[0])
    if taken <= 0:
        return []
    found = lease(taken)
    if len(found) < taken:
        tx.exec("rate_return", {"queue": queue, "n": taken - len(found)})
    return found


def starved(tx: Tx, queues: list[str]) -> dict[str, float]:
    """The limited queues among ``queues`` without a whole token now, each with the
    seconds until its next one."""
    return {str(q): float(due) for q, due in tx.run("rate_due", {"queues": queues,
                                                                 "now": tx.now})
            if due is not None and float(due) > 0}
