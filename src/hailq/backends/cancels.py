"""Cancel by id (SPEC rule 40), written once for every dialect: a part of ``SqlBackend``.

A message's life after a cancel:

- *waiting* (ready, delayed, behind its key): removed at once; it never starts.
- *running* (leased): marked (``cancelled_at``), its token prefixed so that no receipt
  acks, nacks or extends it, the attempt's error "cancelled". It stays leased, so it
  keeps its ``max_in_flight`` slot and its ordering key, until the worker that runs it
  says its handler stopped (``message_cancel_settle``) or its lease ends (upkeep's
  ``leases_expire`` marks it 'cancelled' and ``_cancel_remove`` takes it).
- *finished* (acked, dead) or unknown: ``MessageNotFound``, nothing written.

Every removal goes through ``_cancel_remove``: the one place a cancelled message
leaves, where history records it as cancelled when its queue retains. Removed
messages count as purged, so ``acked = sent - present - purged`` never counts them,
and their keys are freed, on a queue that parks keys too: a cancel is an operator's
decision, not a failure.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hailq.backends.base import CancelledParams, CancelOutcome, MessageIdRef, MessageRef
from hailq.backends.dialect import Tx
from hailq.backends.store import Part
from hailq.errors import MessageNotFound


class CancelStore(Part):
    """The cancel methods of the Backend seam, over ``self.dialect``."""

    def message_cancel(self, params: MessageRef) -> CancelOutcome:
        def cancel(tx: Tx) -> CancelOutcome:
            with tx.atomic():
                self.shared.messages.live(tx, params.queue, fresh=True)  # QueueNotFound first
                # due delays ready, ended leases settled
                self.shared.messages.maintain(tx, params.queue)
                found = tx.one("message_cancel_find", {"queue": params.queue,
                                                       "id": params.id})
                if found is None or found[2] == "dead":
                    raise MessageNotFound(
                        f"queue {params.queue!r} holds no live message {params.id!r} (acked, "
                        "dead, purged or never sent); nothing was cancelled")
                seq, id_, state, key, cancelled_at = found
                if state != "leased":
                    self.remove(tx, params.queue, [(seq, id_, key)])
                    return "waiting"
                if cancelled_at is None:
                    tx.exec("message_cancel_running", {"seq": seq, "id": id_,
                                                       "now": tx.now})
                return "running"

        return self.dialect.work(cancel, durable=True)

    def message_locate(self, params: MessageIdRef) -> str | None:
        found = self.dialect.read(lambda tx: tx.one("message_locate", {"id": params.id}))
        return None if found is None else str(found[0])

    def message_cancelled(self, params: CancelledParams) -> list[str]:
        if not params.receipts:
            return []
        args = _leases(params)
        return [str(r[1]) for r in self.dialect.read(
            lambda tx: tx.run("message_cancelled", args))]

    def message_cancel_settle(self, params: CancelledParams) -> list[str]:
        if not params.receipts:
            return []
        args = _leases(params)

        def settle(tx: Tx) -> list[str]:
            with tx.atomic():
                found = [(r[0], str(r[1]), r[2]) for r in tx.run("message_cancelled", args)]
                if found:
                    self.remove(tx, params.queue, found)
                return [r[1] for r in found]

        return self.dialect.work(settle, durable=False)

    def remove(self, tx: Tx, queue: str,
                       rows: Sequence[tuple[Any, str, str | None]]) -> None:
        """Remove cancelled messages (seq, id, ordering key): history records them first,
        they count as purged, their keys' next messages are freed and a capped queue's
        waiting receivers hear of the room."""
        ids = [r[1] for r in rows]
        seqs = [int(r[0]) for r in rows]
        args = {"queue": queue, "ids": ids, "seqs": seqs, "now": tx.now}
        with tx.atomic():
            self.shared.history.record(tx, queue, list(zip(ids, seqs, strict=True)), "cancelled")
            gone = tx.exec("message_cancel_remove", args)
            if not gone:
                return
            tx.exec("count_purged", {"queue": queue, "n": gone})
            self.shared.messages.release(tx, queue, [r[2] for r in rows if r[2] is not None])
            if self.shared.messages.live(tx, queue).max_in_flight is not None:
                self.dialect.wake(tx, [queue])


def _leases(params: CancelledParams) -> dict[str, Any]:
    """The leases as both dialects' ``message_cancelled`` takes them."""
    receipts = params.receipts
    return {"queue": params.queue,
            "leases": [[r.seq, r.message_id, r.token] for r in receipts],
            "ids": [r.message_id for r in receipts],
            "tokens": [r.token for r in receipts]}
