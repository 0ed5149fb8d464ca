"""History of finished messages (rule 40): a part of ``SqlBackend``.

What is kept, and what it costs whom. A claim of a queue with ``retain`` writes a mark on
each row it leases (``Mark``: keep it, with its body or not, and who runs it since
when); claims of other queues run the statements they always ran. An ack deletes the
row, and the history row of a marked one is written in the same statement: on SQLite by
a row trigger whose WHEN reads the mark (every ack fast path included; for an unmarked
row it does nothing), on PostgreSQL by the ack statement itself, an INSERT over what its
DELETE returned (queries.sql: history_kept; over no row for unmarked ones). Dead and
cancelled messages are not deleted: the core records them with ``history_record``
where they die (a nack, an ended last lease) and the cancel path where it cancels
(clearing the mark, so that a later deletion writes no "acked" row). The maintenance
service prunes each retaining queue's rows older than its retention (its ``history``
duty, hailq/runtime/maintenance.py), one bounded batch per transaction
(``PRUNE_BATCH``): no claim pays for it.

SQLite's trigger writes into ``hailq_history_fresh``, a table without secondary indexes
(migration 19): a history row written one ack at a time into the indexed table dirtied
three b-trees in every ack's commit. ``history_settle`` moves the fresh rows into
``hailq_history`` a bounded batch at a time: claim-time upkeep moves one batch
(``SETTLE_BATCH``) each time it runs, the history duty all of them before it prunes, and
searches read both tables. PostgreSQL has no such table: there it settles nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from hailq.backends.base_parts import SETTLE_BATCH, HistoryPruneParams, HistorySettleParams
from hailq.backends.store import Part
from hailq.history import HistoryEntry, HistoryOutcome, HistoryQuery, entry

if TYPE_CHECKING:
    from hailq.backends.dialect import Tx

class Mark(NamedTuple):
    """What a claim of a queue that keeps history writes on each row it leases: whether
    history keeps it (1) with its body (2), and who runs this attempt: the i-th row in
    rule 16's order ``consumers[i]``, a row past them ``consumers[0]``."""

    retain: int
    consumers: tuple[str, ...]


class HistoryStore(Part):
    """Recording, searching and pruning history, over a SQL dialect."""

    def record(self, tx: Tx, queue: str, messages: Sequence[tuple[str, int | None]],
                       outcome: HistoryOutcome) -> None:
        """Record ``messages`` ((id, seq or None) of rows still stored) as finished with
        ``outcome`` ("dead", "cancelled"; acks record themselves) if the queue retains
        now; nothing otherwise. Run it in the transaction that kills or cancels them,
        before a cancel deletes its row: the row then no longer carries the mark its
        claim wrote, so the deletion writes no "acked" row."""
        if not messages:
            return
        live = self.shared.messages.live(tx, queue)
        if live.retain is None:  # a queue without history pays no statement here...
            if outcome == "cancelled":  # ...but a cancel's delete is no ack
                for message_id, seq in messages:
                    tx.exec("history_recorded", {"queue": queue, "id": message_id,
                                                 "seq": seq})
            return
        retain = 2 if live.retain_bodies else 1
        with tx.atomic():
            for message_id, seq in messages:
                args = {"queue": queue, "id": message_id, "seq": seq, "now": tx.now,
                        "outcome": outcome, "retain": retain}
                if tx.exec("history_record", args):
                    tx.exec("history_recorded", args)

    def forget(self, tx: Tx, queue: str, message_id: str | None = None) -> None:
        """An operator deletes live messages (purge, delete): they were not acked."""
        tx.exec("history_forget", {"queue": queue, "id": message_id})

    def settle(self, tx: Tx, batch: int) -> int:
        if not tx.has("history_fresh_top"):  # PostgreSQL: acks write history in place
            return 0
        top = tx.one("history_fresh_top", {"n": batch})[0]
        if top is None:
            return 0
        with tx.atomic():
            tx.exec("history_settle", {"top": top})
            return tx.exec("history_settled", {"top": top})

    def history_settle(self, params: HistorySettleParams) -> int:
        return self.dialect.work(lambda tx: self.settle(tx, params.batch),
                                 durable=False)

    def history_prune(self, params: HistoryPruneParams) -> int:
        def prune(tx: Tx) -> int:
            self.settle(tx, SETTLE_BATCH)  # what acks wrote is pruned as kept
            return tx.exec("history_prune", {"queue": params.queue, "keep": params.keep,
                                              "n": params.batch, "now": tx.now})

        return int(self.dialect.work(prune, durable=False))

    def history_search(self, query: HistoryQuery) -> list[HistoryEntry]:
        args = {"queue": query.queue, "outcome": query.outcome, "id": query.id,
                "dedup_id": query.dedup_id, "key": query.ordering_key,
                "since": query.since, "until": query.until, "limit": query.limit,
                "hname": None if query.header is None else query.header[0],
                "hvalue": None if query.header is None else query.header[1]}
        # The most selective filter's index first (each statement checks all of them).
        name = ("history_by_id" if query.id is not None
                else "history_by_dedup" if query.dedup_id is not None
                else "history_by_key" if query.ordering_key is not None
                else "history_by_queue" if query.queue is not None
                else "history_recent")
        found = self.dialect.read(lambda tx: tx.run(name, args))
        return [entry(row) for row in found]


def mark_of(live: Any, consumer: str | tuple[str, ...] | None) -> Mark | None:
    """What a claim of a queue with these live settings writes on its rows, if any."""
    if live.retain is None:
        return None
    who = consumer if isinstance(consumer, tuple) and consumer else (
        consumer if isinstance(consumer, str) and consumer else "library",)
    return Mark(2 if live.retain_bodies else 1, who)
