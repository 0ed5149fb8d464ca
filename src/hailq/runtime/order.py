"""Which queue a free slot takes its next message from (SPEC rule 18). Pure, no I/O.

Three orders: round-robin (the default: every queue with ready work gets its
turn), weights (``high=3,low=1``) and strict (drain the first queue, then the
next; asked for by name, since later queues can starve behind a backlog).

A plan is an ordered list of ``(queue, share)``: the fetcher asks each queue
for its share plus whatever the queues before it could not give, so a slot
never stays idle while any queue has work.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal, Protocol

from hailq.errors import InvalidArgument
from hailq.settings import check_name

Plan = list[tuple[str, int]]
OrderName = Literal["round-robin", "strict"]
ORDERS: tuple[OrderName, ...] = ("round-robin", "strict")


class Order(Protocol):
    """Decides how free slots are shared among the queues of one worker."""

    @property
    def queues(self) -> list[str]: ...

    def plan(self, free: int) -> Plan:
        """Shares of ``free`` slots, in the order the queues should be asked."""
        ...

    def served(self, counts: Mapping[str, int]) -> None:
        """What each queue of the last plan gave (its share, and what it took over)."""
        ...


class StrictOrder:
    """Drain the first queue, then the next: a later queue gets only what earlier ones lack."""

    def __init__(self, queues: Sequence[str]) -> None:
        self._queues = _unique(queues)

    @property
    def queues(self) -> list[str]:
        return list(self._queues)

    def plan(self, free: int) -> Plan:
        return [(q, free if i == 0 else 0) for i, q in enumerate(self._queues)]

    def served(self, counts: Mapping[str, int]) -> None:
        pass


class RoundRobinOrder:
    """Give every queue its turn: the default for a worker of several queues.

    Each plan starts one queue further on than the last one's picks reached and
    shares the free slots one by one around the ring, so with ``n`` queues a
    queue with ready work heads a plan at least once every ``n`` picks. A turn
    whose queue is empty passes on to the next queue in the ring; the next plan
    then starts after the queue that took it, so that queue does not get the
    empty queue's turn and its own too: queues with work share alike.
    """

    def __init__(self, queues: Sequence[str]) -> None:
        self._queues = _unique(queues)
        self._next = 0
        self._last: Plan = []

    @property
    def queues(self) -> list[str]:
        return list(self._queues)

    def plan(self, free: int) -> Plan:
        n = len(self._queues)
        start = self._next
        self._next = (start + max(free, 0)) % n
        base, extra = divmod(max(free, 0), n)
        self._last = [(self._queues[(start + i) % n], base + (1 if i < extra else 0))
                      for i in range(n)]
        return list(self._last)

    def served(self, counts: Mapping[str, int]) -> None:
        if all(counts.get(q, 0) >= share for q, share in self._last):
            return  # every turn was taken: the ring moved on by the free slots
        took = [q for q, _ in self._last if counts.get(q, 0) > 0]
        if took:
            self._next = (self._queues.index(took[-1]) + 1) % len(self._queues)


class WeightedOrder:
    """Share slots by weight with smooth weighted round-robin (as nginx balances upstreams).

    With weights ``high=3, low=1`` every run of four picks holds three of
    ``high`` and one of ``low``, interleaved, so a non-empty queue waits at most
    ``ceil(total / weight)`` picks for its turn. A pick that finds its queue
    empty passes on to the next queue in the plan.
    """

    def __init__(self, weights: Mapping[str, int]) -> None:
        self._queues = _unique(list(weights))
        for queue, weight in weights.items():
            if isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= 1000:
                raise InvalidArgument(f"weight of queue {queue!r} must be an integer from 1 "
                                      f"to 1000, got {weight!r}")
        self.weights = dict(weights)
        self._total = sum(self.weights.values())
        self._current = dict.fromkeys(self._queues, 0)

    @property
    def queues(self) -> list[str]:
        return list(self._queues)

    def pick(self) -> str:
        """The next queue in the smooth weighted round-robin."""
        for queue in self._queues:
            self._current[queue] += self.weights[queue]
        best = max(self._queues, key=lambda q: self._current[q])
        self._current[best] -= self._total
        return best

    def plan(self, free: int) -> Plan:
        shares: dict[str, int] = {}
        for _ in range(free):
            queue = self.pick()
            shares[queue] = shares.get(queue, 0) + 1
        rest = [q for q in self._queues if q not in shares]
        return [*shares.items(), *((q, 0) for q in rest)]

    def served(self, counts: Mapping[str, int]) -> None:
        pass


def make_order(queues: Sequence[str], weights: Mapping[str, int] | None = None,
               order: str | None = None) -> Order:
    """The order a worker of ``queues`` uses (SPEC rule 18).

    ``weights`` share slots by weight; otherwise ``order`` is ``"round-robin"``
    (the default) or ``"strict"``. Weights with an order, or an unknown order,
    raise InvalidArgument.
    """
    if order is not None and order not in ORDERS:
        raise InvalidArgument(f"order must be one of {', '.join(ORDERS)}, got {order!r}")
    if weights:
        if order is not None:
            raise InvalidArgument("weights set the order themselves: give weights or an "
                                  "order, not both")
        return WeightedOrder(weights)
    return StrictOrder(queues) if order == "strict" else RoundRobinOrder(queues)


def parse_weights(text: str) -> dict[str, int]:
    """Parse ``high=3,low=1`` into ``{"high": 3, "low": 1}``."""
    weights: dict[str, int] = {}
    for part in text.split(","):
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep:
            raise InvalidArgument(f"weights look like high=3,low=1; got {part!r} in {text!r}")
        try:
            weight = int(value)
        except ValueError:
            raise InvalidArgument(f"weight of queue {name!r} must be an integer, "
                                  f"got {value!r}") from None
        if name in weights:
            raise InvalidArgument(f"queue {name!r} is weighted twice in {text!r}")
        weights[check_name(name)] = weight
    return weights


def _unique(queues: Sequence[str]) -> list[str]:
    if not queues:
        raise InvalidArgument("a worker needs at least one queue")
    seen: list[str] = []
    for queue in queues:
        check_name(queue)
        if queue in seen:
            raise InvalidArgument(f"queue {queue!r} is listed twice")
        seen.append(queue)
    return seen
