"""Sends and publishes, written once for every SQL dialect: a part of ``SqlBackend``
(``core.py``). A send checks its dedup id, inserts and counts (rules 2, 4, 17, 39); a
publish copies into every subscription read in the same transaction (rule 19); a send
on a caller's connection goes through ``hailq/joined.py`` (rules 3, 38)."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext
from functools import cache

from hailq import joined
from hailq.backends.base import NewMessage, PublishParams, SendParams
from hailq.backends.dialect import Tx
from hailq.backends.store import Part
from hailq.errors import MessageTooLarge, OutcomeUnknown, TopicNotFound

# What a send whose outcome a broken or dropped connection left unknown tells its caller
# (rule 31): a rerun under the same dedup_id finds the first try's record (rule 4).
MAYBE_STORED = ("the message may have been stored all the same; a retry with the same "
                "dedup_id is safe (it stores the message once)")


class SendStore(Part):
    """The send and publish methods of the Backend seam, over ``self.dialect``."""

    def message_send(self, params: SendParams) -> list[str]:
        messages = params.messages
        if params.connection is not None:  # the caller's transaction (rules 3, 38)
            return joined.send_joined(self.caller_place(), params.connection, messages)
        try:
            return self.dialect.work(lambda tx: self._send(tx, messages, rerun=False),
                                     durable=True,
                                     rerun=lambda tx: self._send(tx, messages, rerun=True))
        except OutcomeUnknown as exc:
            raise OutcomeUnknown(exc.cause, MAYBE_STORED) from None

    def _send(self, tx: Tx, messages: Sequence[NewMessage], rerun: bool,
              published: bool = False) -> list[str]:
        """Insert what no dedup record claims. With ``rerun`` (the first try's connection
        broke with its commit unknown) a dedup record that try made means it was stored
        then, and may be consumed already: it is not inserted again. The insert itself
        skips message ids that are stored already."""
        ids: list[str] = []
        fresh: list[NewMessage] = []
        # One statement without a transaction only for one queue: across queues, one
        # without a row (deleted) must undo the others' rows (a batch is all or none).
        plain = all(m.dedup_id is None and m.ordering_key is None for m in messages) and (
            len(messages) == 1 or len({m.queue for m in messages}) == 1)
        with tx.atomic() if not plain else nullcontext():
            for m in messages:
                if m.dedup_id is not None:
                    owner, made = tx.one("dedup_claim", {
                        "queue": m.queue, "dedup_id": m.dedup_id, "id": m.id,
                        "now": tx.now})
                    if owner != m.id or (rerun and not made):
                        ids.append(str(owner))
                        continue
                fresh.append(m)
                ids.append(m.id)
            if fresh:
                keyed = [f"{m.queue}\x1f{m.ordering_key}" for m in fresh
                         if m.ordering_key is not None]
                if keyed:  # sends and releases of one key take turns (rule 17)
                    tx.also("keys_lock", {"keys": sorted(set(keyed))})
                if self.dialect.insert(tx, fresh, rerun) < len(fresh):
                    # A queue without a row, or a body over its queue's limit, inserts
                    # nothing; otherwise a re-run found its first try's rows.
                    self._too_large(tx, fresh, published)
        return ids

    def _too_large(self, tx: Tx, messages: Sequence[NewMessage], published: bool) -> None:
        """The insert stored nothing because a body is over its queue's max_message_size
        as stored now (rule 39): which, read afresh. A queue without a row (deleted, or
        never declared) is QueueNotFound; a send never makes one up."""
        for queue in sorted({m.queue for m in messages}):
            limit = self.shared.messages.live(tx, queue, fresh=True).max_message_size
            large = max(len(m.body) for m in messages if m.queue == queue)
            if large > limit:
                said = (f"body is {large} bytes encoded; queue {queue!r} allows at most "
                        f"{limit} (setting max_message_size)")
                raise MessageTooLarge(f"subscription {queue}: {said}; nothing was "
                                      "published" if published else said)

    def topic_publish(self, params: PublishParams) -> list[str]:
        def publish(tx: Tx) -> list[str]:
            with tx.atomic():
                subscriptions = self.shared.catalog.subscriptions(tx, params.topic)
                if not subscriptions and tx.one("topic_get", {"name": params.topic}) is None:
                    raise TopicNotFound(f"no topic named {params.topic!r} (deleted?); "
                                        "declare it with broker.topic()")
                copies = params.build(subscriptions)
                return self._send(tx, copies, rerun=False, published=True) if copies else []

        if params.connection is not None:
            return joined.publish_joined(self.caller_place(), params.connection,
                                         params.topic, params.build)
        try:
            return self.dialect.work(publish, durable=True)
        except OutcomeUnknown as exc:
            raise OutcomeUnknown(exc.cause, MAYBE_STORED) from None

    def caller_place(self) -> joined.Place:
        """What a send on a caller's connection needs (``hailq/joined.py``); the instance
        id (migration 13 on SQLite, 11 on PostgreSQL) is read once, when first needed."""
        if self.shared.place is None:
            d = self.dialect
            me = cache(lambda: str(d.read(lambda tx: tx.one("instance_id", {}))[0]))
            self.shared.place = joined.Place(d.flavor, d.caller_queries(), d.caller_now,
                                             me, d.url_for_display)
        return self.shared.place
