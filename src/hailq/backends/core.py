"""The storage choreography, written once for every SQL dialect.

What happens in which order lives here: a send checks its dedup id, inserts
and counts; a claim acks finished work, frees the keys it held, settles the
queue when its upkeep is due, leases the next rows in rule 16's order and
counts redeliveries; a nack counts and frees a dead message's key; reads map
rows to models. A dialect (``sqlite/``, ``postgres/``) brings its connections
and transactions, its ``queries.sql`` (the same statement names in both, apart
from a listed few) and its real fast paths; it never repeats a step of these.

Per-key order (rule 17) lives in three places a reader can find: a keyed
message is inserted ``blocked`` behind an earlier live one of its key
(``message_insert``), every step that ends a key's head calls ``_release``
below, and ``key_release`` / ``keys_release`` in each ``queries.sql`` free the
next message once nothing earlier holds the key. SQLite's in-time acks free it
themselves (``key_release_acked`` / ``keys_release_acked``, just before their
delete), so that they need not return the rows they delete.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Any, NamedTuple, Protocol, TypeVar

from hailq.backends import rates, rows
from hailq.backends.base import (
    AckParams,
    AckTransactionParams,
    ClaimedRow,
    ClaimParams,
    ClaimResult,
    ExtendParams,
    NackParams,
    QueueRef,
    Receipt,
    WaitParams,
)
from hailq.backends.base_parts import SETTLE_BATCH
from hailq.backends.dialect import Acked, FastPathMissed, Outcome, Tx
from hailq.backends.history import mark_of
from hailq.backends.operators import _no_queue
from hailq.backends.store import Part
from hailq.errors import (
    LeaseLost,
)
from hailq.models import QueueStats
from hailq.settings import MIB

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
MAINTAIN_EVERY = 0.05  # seconds between claim-time upkeep runs per queue and process
MAINTAIN_BATCH = 1000  # rows PostgreSQL settles per statement (queries.sql: LIMIT 1000)
# Seconds a process keeps a queue's stored settings before it reads them again: an
# operator's change (a lease, a cap, attempts) reaches running consumers within this.
SETTINGS_FOR = 0.5


class _Unit(Protocol[T_co]):
    """A unit of work that may try its dialect's shortcuts (``fast``) first."""

    def __call__(self, tx: Tx, fast: bool) -> T_co: ...


class Live(NamedTuple):
    """A queue's settings as stored now: what a claim obeys (rules 1, 6, 13)."""

    lease: float
    max_in_flight: int | None
    max_attempts: int
    park: bool
    rate: float | None = None  # rule 33: messages per second, None: no limit
    burst: float = 0.0  # the bucket's size where there is a rate
    paused: bool = False  # an operator paused the queue: claims get nothing (rule 32)
    max_message_size: int = MIB  # the largest body a send may store (rule 39)
    retain: float | None = None  # rule 40: seconds history keeps finished messages
    retain_bodies: bool = True


class MessageCore(Part):
    """The messages' part of ``SqlBackend``: claims, acks, nacks, extensions, a queue's
    live settings and its claim-time upkeep, and freeing keys (rule 17), which the
    other parts call through ``Shared.messages``."""

    # -- queues --------------------------------------------------------------------------

    def live(self, tx: Tx, queue: str, fresh: bool = False) -> Live:
        """The queue's stored settings, read again when older than SETTINGS_FOR."""
        now = time.monotonic()
        kept = self.shared.settings.get(queue)
        if kept is not None and not fresh and now - kept[0] < SETTINGS_FOR:
            return kept[1]
        found = tx.one("queue_live", {"queue": queue})
        if found is None:  # deleted, or never declared: never a queue made up here
            self.shared.settings.pop(queue, None)
            raise _no_queue(queue)
        lease, cap, attempts, park, paused, size, retain, bodies = found
        live = Live(float(lease), None if cap is None else int(cap), int(attempts),
                    bool(park), *rates.live(tx, queue), paused=bool(paused),
                    max_message_size=int(size),
                    retain=None if retain is None else float(retain),
                    retain_bodies=bool(bodies))
        self.shared.settings[queue] = (now, live)
        return live

    def queue_maintain(self, params: QueueRef) -> None:
        # PostgreSQL settles at most a batch per transaction: a short one each, as many
        # as it takes (an operator's maintain leaves nothing for the next receive).
        queue = params.queue
        while self.dialect.work(lambda tx: self.maintain(tx, queue), durable=False):
            pass

    def maintain(self, tx: Tx, queue: str) -> bool:
        """Claim-time upkeep, no sweeper needed: due messages become ready, ended leases
        give their message back or kill it after its last attempt (rule 13). The SQL
        reads the attempts and the dead-letter policy where it runs. True when a batch
        was full (PostgreSQL bounds each statement): more may be waiting."""
        self.shared.maintained[queue] = _clock(tx)
        args = {"queue": queue, "now": tx.now}
        with tx.atomic():
            promoted = tx.exec("scheduled_promote", args)
            ended = tx.run("leases_expire", args)
            dead = [(key, parked) for state, key, parked, *_ in ended if state == "dead"]
            if dead:
                tx.exec("count_dead", {"queue": queue, "n": len(dead)})
                self.shared.history.record(tx, queue, [(i, s) for state, _, _, i, s in ended
                                                       if state == "dead"], "dead")
                self.release(tx, queue, [k for k, parked in dead
                                         if k is not None and not parked])
            cancelled = [(r[4], r[3], r[1]) for r in ended if r[0] == "cancelled"]
            if cancelled:  # rule 40: its lease ended before its handler said it stopped
                self.shared.cancels.remove(tx, queue, cancelled)
            # SQLite: history its acks wrote unindexed moves in (backends/history.py).
            settled = self.shared.history.settle(tx, SETTLE_BATCH)
        return max(promoted, len(ended)) >= MAINTAIN_BATCH or settled >= SETTLE_BATCH

    def release(self, tx: Tx, queue: str, keys: Iterable[str]) -> None:
        """Free the next message of each key whose head just ended (rule 17)."""
        unique = sorted(set(keys))
        if not unique:
            return
        tx.also("keys_lock", {"keys": [f"{queue}\x1f{k}" for k in unique]})
        if len(unique) == 1:  # a direct index probe, where a set costs a join
            tx.exec("key_release", {"queue": queue, "key": unique[0], "now": tx.now})
        else:
            tx.exec("keys_release", {"queue": queue, "keys": unique, "now": tx.now})

    def queue_stats(self, params: QueueRef) -> QueueStats:
        queue = params.queue

        def look(tx: Tx) -> QueueStats:
            live = tx.one("queue_live", {"queue": queue})
            if live is None:
                raise _no_queue(queue)
            row = tx.one("stats", {"queue": queue, "now": tx.now})  # its clock comes last
            parked = [r[0] for r in tx.run("stats_parked", {"queue": queue, "now": tx.now})]
            return rows.stats(queue, row[:-1], float(row[-1]), parked, bool(live[4]))

        return self.dialect.read(look)

    # -- receiving -----------------------------------------------------------------------

    def message_claim(self, params: ClaimParams) -> ClaimResult:
        if not params.acks:
            # partial, not a lambda: one Python frame less on every receive
            return ClaimResult([], self.dialect.work(partial(self._claim, params=params),
                                                     durable=False))
        return self._fast_first(partial(self._ack_claim, params=params),
                                rerun=lambda tx: self._ack_claim(tx, params, False,
                                                                 rerun=True))

    def _ack_claim(self, tx: Tx, params: ClaimParams, fast: bool,
                   rerun: bool = False) -> ClaimResult:
        fused = None
        if not self._upkeep_due(tx, params.queue):
            live = self.live(tx, params.queue)
            if live.max_in_flight is None and live.rate is None and not live.paused:
                fused = self.dialect.ack_claim(
                    tx, params.acks, params.queue, params.max_messages,
                    live.lease if params.lease is None else params.lease,
                    mark_of(live, params.consumer))
        done, found = fused if fused is not None else ({}, [])
        left = [r for r in params.acks if r[:3] not in done]
        if not left:
            acked = done
        elif fast and self.dialect.ack_in_time(tx, left):
            acked = {**done, **{r[:3]: False for r in left}}
        else:
            acked = self._acked(tx, left, done, plain_tried=fused is not None)
        outcome = self._outcome(tx, params.acks, acked, rerun)
        self._woken(tx, params.acks, acked)
        return ClaimResult(outcome, found or self._claim(tx, params))

    def _upkeep_due(self, tx: Tx, queue: str) -> bool:
        return _clock(tx) - self.shared.maintained.get(queue, -MAINTAIN_EVERY) >= MAINTAIN_EVERY

    def _claim(self, tx: Tx, params: ClaimParams) -> list[ClaimedRow]:
        queue = params.queue
        due = self._upkeep_due(tx, queue)
        live = self.live(tx, queue)
        if due:
            self.maintain(tx, queue)
        found = self._claim_now(tx, params, live)
        if not found and not due:
            self.maintain(tx, queue)
            found = self._claim_now(tx, params, live)
        return found

    def _claim_now(self, tx: Tx, params: ClaimParams, live: Live) -> list[ClaimedRow]:
        if live.paused:  # an operator paused it: nothing is leased (rule 32)
            return []
        claim = partial(self.dialect.claim, tx, params.queue,
                        lease=live.lease if params.lease is None else params.lease,
                        mark=mark_of(live, params.consumer))
        if live.max_in_flight is None and live.rate is None:
            return claim(params.max_messages)
        with tx.atomic():
            room = params.max_messages
            if live.max_in_flight is not None:
                # A cap across every consumer: claims of the queue take turns.
                tx.also("in_flight_lock", {"queue": params.queue})
                leased = int(tx.one("in_flight", {"queue": params.queue})[0])
                room = min(room, live.max_in_flight - leased)
            if room > 0 and live.rate is not None:  # rule 33, within the cap (rule 1)
                return rates.claim(tx, params.queue, room, live.rate, live.burst, claim)
            return claim(room) if room > 0 else []

    def message_wait(self, params: WaitParams) -> None:
        queues, timeout = self.wait_plan(params)
        if queues:
            self.dialect.wait(queues, timeout)
        else:
            self.dialect.sleep(max(timeout, 0.001))

    def wait_plan(self, params: WaitParams) -> tuple[list[str], float]:
        """The queues worth waiting on, and for how long: a queue out of tokens (rule 33)
        is not waited on until its next token is due (none left: only sleep)."""
        queues, timeout = list(params.queues), params.timeout
        limited = [q for q in queues if (kept := self.shared.settings.get(q)) is not None
                   and kept[1].rate is not None]
        if limited:
            starved = self.dialect.read(lambda tx: rates.starved(tx, limited))
            if starved:
                queues = [q for q in queues if q not in starved]
                timeout = min(timeout, min(starved.values()))
        return queues, timeout

    # -- finishing -----------------------------------------------------------------------

    def message_ack(self, params: AckParams) -> list[bool | None]:
        receipts = params.receipts
        again = partial(self._ack_many, receipts=receipts, fast=False, rerun=True)
        if len(receipts) == 1:  # the commonest ack: no shortcut to try first
            return self.dialect.work(partial(self._ack_one, receipt=receipts[0]),
                                     durable=False, rerun=again)
        return self._fast_first(partial(self._ack_many, receipts=receipts), rerun=again)

    def _ack_many(self, tx: Tx, receipts: Sequence[Receipt], fast: bool,
                  rerun: bool = False) -> list[bool | None]:
        if fast and self.dialect.ack_in_time(tx, receipts):  # the commonest batch
            self._made_room(tx, receipts[0].queue)
            return [False] * len(receipts)
        acked = self._acked(tx, receipts, {})
        self._woken(tx, receipts, acked)
        return self._outcome(tx, receipts, acked, rerun)

    def _ack_one(self, tx: Tx, receipt: Receipt) -> list[bool | None]:
        """``_ack_many`` for the commonest ack: one receipt."""
        late = None
        if self.dialect.acks_plain_apart and receipt.queue not in self.dialect.keyed:
            late = self.dialect.ack_plain(tx, (receipt,)).get(receipt[:3])
        elif self.dialect.ack_in_time(tx, (receipt,)):  # its key freed too
            late = False
        if late is None:
            with tx.atomic():  # a key's next message is freed in the ack's transaction
                late = self._ack_keyed(tx, receipt)
        if late is None:
            return [None]
        self._made_room(tx, receipt.queue)
        return [late]

    def _ack_keyed(self, tx: Tx, receipt: Receipt) -> bool | None:
        """Ack one receipt and free its key; whether it was late, None if lost."""
        found = self.dialect.ack(tx, (receipt,))
        if not found:
            return None
        self._note_keys(receipt.queue, found)
        if found[0].ordering_key is not None:
            self.release(tx, receipt.queue, [found[0].ordering_key])
        return bool(found[0].late)

    def _note_keys(self, queue: str, found: Sequence[Acked]) -> None:
        if any(a.ordering_key is not None for a in found):
            self.dialect.keyed.add(queue)
        else:
            self.dialect.keyed.discard(queue)

    def _acked(self, tx: Tx, receipts: Sequence[Receipt], done: Outcome,
               plain_tried: bool = False) -> Outcome:
        """Ack ``receipts`` and free their keys; ``done`` were acked already (their keys
        need nothing: a fused ack only takes messages without one). Messages without a
        key go first where the dialect acks them outside a transaction (``ack_plain``);
        the rest are acked with their keys' release in one transaction."""
        if self.dialect.acks_plain_apart and not plain_tried \
                and not all(r.queue in self.dialect.keyed for r in receipts):
            plain = self.dialect.ack_plain(tx, receipts)
            if plain:
                done = {**done, **plain}
                receipts = [r for r in receipts if r[:3] not in plain]
                if not receipts:
                    return done
        first = receipts[0].queue
        by_queue: dict[str, list[Receipt]] = {}
        if all(r.queue == first for r in receipts):  # the common case: one queue
            by_queue[first] = list(receipts)
        else:
            for r in receipts:
                by_queue.setdefault(r.queue, []).append(r)
        acked = dict(done)
        for queue, group in by_queue.items():
            with tx.atomic():
                found = self.dialect.ack(tx, group)
                self._note_keys(queue, found)
                self.release(tx, queue, [a.ordering_key for a in found
                                         if a.ordering_key is not None])
            for a in found:
                acked[(queue, a.id, a.token)] = bool(a.late)
        return acked

    def _outcome(self, tx: Tx, receipts: Sequence[Receipt], acked: Outcome,
                 rerun: bool) -> list[bool | None]:
        """Per receipt, by receipt (queue, id and token): a stale receipt, or one naming
        another queue, beside the current one of the same message gets None, not the
        current one's answer. After a re-run (the first try's connection broke, its
        commit unknown) a receipt whose message is gone was acked by that first try."""
        if rerun:
            unsure = [r.message_id for r in receipts if r[:3] not in acked]
            if unsure:
                present = {row[0] for row in tx.run("messages_present", {"ids": unsure})}
                acked = {**acked, **{r[:3]: False for r in receipts
                                     if r.message_id not in present and r[:3] not in acked}}
        return [acked.get(r[:3]) for r in receipts]

    def _woken(self, tx: Tx, receipts: Sequence[Receipt], acked: Outcome) -> None:
        """A settled message of a capped queue makes room: its waiting receivers hear."""
        if acked:
            capped = [q for q in {q for q, _, _ in acked}
                      if self.live(tx, q).max_in_flight is not None]
            if capped:
                self.dialect.wake(tx, capped)

    def _made_room(self, tx: Tx, queue: str) -> None:
        """``_woken`` for acks of one queue."""
        if self.live(tx, queue).max_in_flight is not None:
            self.dialect.wake(tx, [queue])

    def _fast_first(self, fn: _Unit[T],
                    rerun: Callable[[Tx], T] | None = None) -> T:
        try:
            return self.dialect.work(partial(fn, fast=True), durable=False, rerun=rerun)
        except FastPathMissed:
            return self.dialect.work(partial(fn, fast=False), durable=False, rerun=rerun)

    @contextmanager
    def message_ack_transaction(self, params: AckTransactionParams) -> Iterator[Any]:
        receipt = params.receipt
        # The ack goes first: it fences the message (nobody else can lease it until this
        # transaction ends) and fails before the effect when the lease is already lost.
        with self.dialect.effect() as (tx, conn):
            acked = ({receipt[:3]: False} if self.dialect.ack_in_time(tx, (receipt,))
                     else self._acked(tx, [receipt], {}))
            if not acked:
                raise LeaseLost(f"message {receipt.message_id} was received again or is "
                                "gone; the transaction was rolled back")
            self._woken(tx, [receipt], acked)
            yield conn

    def message_nack(self, params: NackParams) -> bool:
        r = params.receipt

        def nack(tx: Tx) -> bool:
            with tx.atomic():
                found = tx.one("message_nack", {
                    "queue": r.queue, "id": r.message_id, "token": r.token, "seq": r.seq,
                    "now": tx.now, "error": params.error, "delay": params.delay,
                    "dead": params.outcome == "dead",
                    "spare": params.outcome == "give_back"})
                if found is None:
                    return False
                state, key, parked = found
                tx.also("count_nacked", {"queue": r.queue, "dead": int(state == "dead")})
                if state == "dead":
                    self.shared.history.record(tx, r.queue, [(r.message_id, r.seq)], "dead")
                if state == "dead" and key is not None and not parked:
                    self.release(tx, r.queue, [key])
                if self.live(tx, r.queue).max_in_flight is not None:
                    self.dialect.wake(tx, [r.queue])
                return True

        return self.dialect.work(nack, durable=False)

    def message_extend(self, params: ExtendParams) -> list[float | None]:
        def extend(tx: Tx) -> list[float | None]:
            # By receipt: a stale one is told it lost its lease, not given another's.
            found = self.dialect.extend(tx, params.receipts, params.seconds)
            return [found.get((r.message_id, r.token)) for r in params.receipts]

        return self.dialect.work(extend, durable=False)


def _clock(tx: Tx) -> float:
    """The time upkeep is throttled by: the dialect's clock where it passes one to its
    statements (a test's injected clock moves it), else this process's."""
    return time.monotonic() if tx.now is None else tx.now
