"""A small pure-Python model of SPEC rules 2-17 for one queue, for the state-machine test.

It knows nothing of SQL. A message is *pending* (waiting or receivable),
*leased*, *dead* or gone (acked). Keyed messages (rule 17) are *blocked*
until their key is free: each key has at most one *released* message (pending
or leased); when it is acked or dies the oldest blocked one is released.
Delivery order (rule 16) is by sort key, then send sequence.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ModelMessage:
    id: str
    seq: int
    priority: int
    key: str | None
    body: object
    available_at: float
    sort_key: float
    state: str = "pending"  # pending | leased | dead
    blocked: bool = False
    attempt: int = 0
    token: str | None = None  # the receipt of the latest lease (kept after it ends)
    lease_until: float = 0.0
    dead_by_nack: bool = False


@dataclass
class QueueModel:
    lease: float
    max_attempts: int
    aging: float | None
    messages: dict[str, ModelMessage] = field(default_factory=dict)
    dedup: dict[str, str] = field(default_factory=dict)
    seq: int = 0
    sent: int = 0
    expired_unseen: bool = False  # leases ended since the last receive ran its upkeep

    def sort_key(self, priority: int, available_at: float) -> float:
        return float(-priority) if self.aging is None else available_at - priority * self.aging

    # -- sending ---------------------------------------------------------------------------------

    def send(self, message_id: str, body: object, priority: int, key: str | None,
             delay: float, dedup_id: str | None, now: float) -> str:
        """The id ``send`` must return (the first one for a repeated dedup id)."""
        if dedup_id is not None and dedup_id in self.dedup:
            return self.dedup[dedup_id]
        if dedup_id is not None:
            self.dedup[dedup_id] = message_id
        self.seq += 1
        self.sent += 1
        m = ModelMessage(message_id, self.seq, priority, key, body, now + delay,
                         self.sort_key(priority, now + delay))
        m.blocked = key is not None and self._key_busy(key, besides=None)
        self.messages[message_id] = m
        return message_id

    def _key_busy(self, key: str, besides: ModelMessage | None) -> bool:
        return any(m.key == key and m is not besides and m.state in ("pending", "leased")
                   for m in self.messages.values())

    def _release(self, key: str | None) -> None:
        if key is None:
            return
        if any(m.key == key and not m.blocked and m.state in ("pending", "leased")
               for m in self.messages.values()):
            return
        waiting = [m for m in self.messages.values()
                   if m.key == key and m.blocked and m.state == "pending"]
        if waiting:
            min(waiting, key=lambda m: m.seq).blocked = False

    # -- time ------------------------------------------------------------------------------------

    def advance(self, now: float) -> None:
        """Leases that ended by ``now`` end: back to pending, or dead after the last attempt."""
        for m in self.messages.values():
            if m.state == "leased" and m.lease_until <= now:
                self.expired_unseen = True
                if m.attempt >= self.max_attempts:
                    m.state = "dead"
                    self._release(m.key)
                else:
                    m.state = "pending"

    # -- receiving -------------------------------------------------------------------------------

    def receivable(self, now: float) -> list[ModelMessage]:
        found = [m for m in self.messages.values()
                 if m.state == "pending" and not m.blocked and m.available_at <= now]
        return sorted(found, key=lambda m: (m.sort_key, m.seq))

    def receive(self, got: list[tuple[str, str]], now: float) -> None:
        """Apply a receive that returned ``(id, receipt)`` pairs."""
        self.expired_unseen = False
        for message_id, receipt in got:
            m = self.messages[message_id]
            m.state = "leased"
            m.attempt += 1
            m.token = receipt
            m.lease_until = now + self.lease

    # -- finishing -------------------------------------------------------------------------------

    def current(self, message_id: str, receipt: str) -> ModelMessage | None:
        m = self.messages.get(message_id)
        if m is None or m.token != receipt:
            return None
        return m

    def ack(self, message_id: str) -> None:
        m = self.messages.pop(message_id)
        if m.state != "dead":
            self._release(m.key)

    def nack(self, message_id: str, delay: float, now: float) -> None:
        m = self.messages[message_id]
        m.token = None
        if m.attempt >= self.max_attempts:
            m.state = "dead"
            m.dead_by_nack = True
            self._release(m.key)
            return
        m.state = "pending"
        m.available_at = now + delay
        if self.aging is not None:
            m.sort_key = self.sort_key(m.priority, now + delay)

    def extend(self, message_id: str, seconds: float, now: float) -> None:
        m = self.messages[message_id]
        m.state = "leased"
        m.lease_until = now + seconds

    def redrive(self, now: float) -> int:
        dead = sorted((m for m in self.messages.values() if m.state == "dead"),
                      key=lambda m: m.seq)
        for m in dead:
            m.state = "pending"
            m.attempt = 0
            m.token = None
            m.dead_by_nack = False
            m.available_at = now
            m.sort_key = self.sort_key(m.priority, now)
            m.blocked = m.key is not None
        for key in {m.key for m in dead}:
            self._release(key)
        return len(dead)

    # -- counting --------------------------------------------------------------------------------

    def counts(self, now: float) -> dict[str, int]:
        c = {"ready": 0, "scheduled": 0, "in_flight": 0, "blocked": 0, "dead": 0}
        for m in self.messages.values():
            if m.state == "leased":
                c["in_flight"] += 1
            elif m.state == "dead":
                c["dead"] += 1
            elif m.blocked:
                c["blocked"] += 1
            elif m.available_at <= now:
                c["ready"] += 1
            else:
                c["scheduled"] += 1
        return c
