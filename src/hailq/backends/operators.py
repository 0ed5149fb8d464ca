"""Operators' actions on the storage core: describe, configure, pause, delete queues,
topics, subscriptions and single messages (rule 32); peek, dead letters, redrive and
purge. A part of ``SqlBackend`` over
``self.dialect``, so the seam's operator methods are written once for every dialect."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from hailq.backends import rates, rows
from hailq.backends.base import (
    DeadListParams,
    DeleteParams,
    MessageRef,
    PeekParams,
    PurgeParams,
    QueueConfigureParams,
    QueueDescribeParams,
    QueuePauseParams,
    RedriveParams,
    SubscriptionDeleteParams,
)
from hailq.backends.dialect import Tx
from hailq.backends.store import Part
from hailq.errors import QueueNotEmpty, QueueNotFound, TopicHasSubscriptions, TopicNotFound
from hailq.models import DeadMessage, MessageDetails, PeekedMessage, QueueRecord
from hailq.settings import QueueSettings, parse_overrides


class OperatorStore(Part):
    """The operator methods of the Backend seam, over ``self.dialect``."""

    def queue_describe(self, params: QueueDescribeParams) -> list[QueueRecord]:
        args = {"all": params.names is None, "names": list(params.names or [])}
        found = self.dialect.read(lambda tx: tx.run("queue_describe", args))
        return [QueueRecord(str(n), str(s), None if o is None else str(o), bool(p))
                for n, s, o, p in found]

    def queue_configure(self, params: QueueConfigureParams) -> QueueRecord:
        changes = json.loads(params.changes)

        def configure(tx: Tx) -> QueueRecord:
            with tx.atomic():
                overrides, paused = _overrides_locked(tx, params.name)
                declared = tx.one("queue_get", {"name": params.name})
                if declared is None:
                    raise _no_queue(params.name)
                merged = {**({} if params.reset else overrides), **changes}
                settings = QueueSettings.from_json(str(declared[0]))
                before, effective = settings.overlay(overrides), settings.overlay(merged)
                text = json.dumps(merged, sort_keys=True) if merged else None
                tx.exec("queue_override", {"name": params.name, "overrides": text,
                                           "now": tx.now})
                tx.exec("queue_apply", _columns(params.name, effective))
                _follow(tx, params.name, effective, effective.ordering != before.ordering)
                return QueueRecord(params.name, str(declared[0]), text, paused)

        record = self.dialect.work(configure, durable=True)
        self.shared.settings.pop(params.name, None)
        return record

    def queue_pause(self, params: QueuePauseParams) -> None:
        def pause(tx: Tx) -> None:
            with tx.atomic():
                if tx.one("queue_get", {"name": params.name}) is None:
                    raise _no_queue(params.name)
                tx.run("queue_pause", {"name": params.name, "paused": params.paused,
                                       "now": tx.now})

        self.dialect.work(pause, durable=True)
        self.shared.settings.pop(params.name, None)

    def queue_delete(self, params: DeleteParams) -> int:
        args = {"queue": params.name}

        def delete(tx: Tx) -> int:
            with tx.atomic():
                tx.also("queue_lock", {"name": params.name})
                if tx.one("queue_get", {"name": params.name}) is None:
                    raise _no_queue(params.name)
                held = int(tx.one("queue_messages_count", args)[0])
                if held and not params.force:
                    raise QueueNotEmpty(
                        f"queue {params.name!r} holds {held} message(s) (live or dead); "
                        "nothing was deleted: purge it first, or delete with force")
                self.shared.history.forget(tx, params.name)  # deleted, not acked (rule 40)
                count = tx.exec("queue_delete_messages", args)
                for step in ("queue_delete_dedup", "queue_delete_counters",
                             "queue_delete_ops", "queue_delete_subscriptions",
                             "queue_delete"):
                    tx.exec(step, args)
                return count

        count = self.dialect.work(delete, durable=True)
        self.shared.settings.pop(params.name, None)
        self.shared.maintained.pop(params.name, None)
        return count

    def message_get(self, params: MessageRef) -> MessageDetails | None:
        found = self.dialect.read(lambda tx: tx.one("message_get", {
            "queue": params.queue, "id": params.id, "now": tx.now}))
        return None if found is None else rows.details(params.queue, found)

    def message_delete(self, params: MessageRef) -> bool:
        args = {"queue": params.queue, "id": params.id}

        def delete(tx: Tx) -> bool:
            with tx.atomic():
                self.shared.history.forget(tx, params.queue, params.id)  # deleted, not acked
                gone = tx.run("message_delete", args)
                if not gone:
                    return False
                # Counted as purged, so acked (sent - present - purged) never counts it.
                tx.exec("count_purged", {"queue": params.queue, "n": len(gone)})
                self.shared.messages.release(tx, params.queue,
                                             [r[0] for r in gone if r[0] is not None])
                if self.shared.messages.live(tx, params.queue).max_in_flight is not None:
                    self.dialect.wake(tx, [params.queue])
                return True

        return self.dialect.work(delete, durable=True)

    def topic_delete(self, params: DeleteParams) -> int:
        args = {"name": params.name}

        def delete(tx: Tx) -> int:
            with tx.atomic():
                if tx.one("topic_get", args) is None:
                    raise TopicNotFound(f"no topic named {params.name!r}")
                held = len(self.shared.catalog.subscriptions(tx, params.name))
                if held and not params.force:
                    raise TopicHasSubscriptions(
                        f"topic {params.name!r} has {held} subscription(s); nothing was "
                        "deleted: unsubscribe them first, or delete with force (their "
                        "queues stay)")
                count = tx.exec("topic_subscriptions_delete", args)
                tx.exec("topic_delete", args)
                return count

        return self.dialect.work(delete, durable=True)

    def subscription_delete(self, params: SubscriptionDeleteParams) -> bool:
        return bool(self.dialect.work(lambda tx: tx.exec("subscription_delete", {
            "topic": params.topic, "queue": params.queue}), durable=True))

    # -- reading and settling messages -----------------------------------------------------

    def message_peek(self, params: PeekParams) -> list[PeekedMessage]:
        found = self.dialect.read(lambda tx: tx.run("message_peek", {
            "queue": params.queue, "limit": params.limit, "now": tx.now}))
        return [rows.peeked(params.queue, r) for r in found]

    def dead_list(self, params: DeadListParams) -> list[DeadMessage]:
        found = self.dialect.read(lambda tx: tx.run("dead_list", {
            "queue": params.queue, "ordering_key": params.ordering_key, "now": tx.now,
            "older_than": params.older_than, "error": params.error_contains,
            "limit": params.limit, "newest": params.newest_first}))
        return [rows.dead_letter(params.queue, r) for r in found]

    def dead_redrive(self, params: RedriveParams) -> int:
        args = {"queue": params.queue, "ids": list(params.ids or []),
                "all": params.ids is None}

        def redrive(tx: Tx) -> int:
            with tx.atomic():
                self.shared.messages.maintain(tx, params.queue)
                keys = [r[0] for r in tx.run("dead_keys", args)]
                count = tx.exec("dead_redrive", {**args, "now": tx.now})
                self.shared.messages.release(tx, params.queue, keys)
                self.dialect.wake(tx, [params.queue])
                return count

        return self.dialect.work(redrive, durable=True)

    def message_purge(self, params: PurgeParams) -> int:
        queue = params.queue

        def purge(tx: Tx) -> int:
            with tx.atomic():
                self.shared.messages.maintain(tx, queue)
                if params.dead:
                    gone = tx.run("purge_dead", {"queue": queue})
                    self.shared.messages.release(tx, queue, [k for k, parked in gone
                                                             if k is not None and parked])
                    count = len(gone)
                else:
                    self.shared.history.forget(tx, queue)  # purged, not acked (rule 40)
                    count = tx.exec("purge_live", {"queue": queue})
                tx.exec("count_purged", {"queue": queue, "n": count})
                return count

        return self.dialect.work(purge, durable=True)



def _no_queue(name: str) -> QueueNotFound:
    return QueueNotFound(f"no queue named {name!r} (never declared, or deleted); declare "
                         "it with broker.queue()")


def _overrides_locked(tx: Tx, name: str) -> tuple[dict[str, Any], bool]:
    """Queue ``name``'s operator overrides and whether it is paused, read once its
    settings are locked: a declaration and an operator's change of one queue take turns,
    so neither computes the effective settings from overrides the other is changing."""
    tx.also("queue_lock", {"name": name})
    ops = tx.one("queue_ops_get", {"name": name})
    return ({}, False) if ops is None else (parse_overrides(ops[0]), bool(ops[1]))


def _columns(name: str, effective: QueueSettings) -> dict[str, Any]:
    """The settings statements obey, as the queues table's columns hold them."""
    return {"name": name, "lease": effective.lease, "max_attempts": effective.max_attempts,
            "aging": effective.aging, "max_in_flight": effective.max_in_flight,
            "park": effective.on_dead == "park", "deadlines": _deadlines(effective),
            "retry": json.dumps(asdict(effective.retry), sort_keys=True),
            "dedup_window": effective.dedup_window,
            "max_message_size": effective.max_message_size,
            "retain": effective.retain, "retain_bodies": effective.retain_bodies}


def _follow(tx: Tx, name: str, effective: QueueSettings, resort: bool) -> None:
    """What follows a queue's new effective settings besides its columns: its rate
    bucket and, where its order changed, its live messages' keys (rules 16, 41: one
    order for old and new messages)."""
    tx.exec("queue_rate_save", rates.save_args(name, asdict(effective)))
    if resort:
        tx.exec("queue_resort", {"queue": name})


def _deadlines(effective: QueueSettings) -> str | None:
    """Deadline order's target of every priority (rule 41), a JSON array indexed by
    priority, as the queues table holds it; None in priority order."""
    targets = effective.targets
    return None if targets is None else json.dumps(list(targets))
