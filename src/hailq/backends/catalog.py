"""The catalog of the storage core: queues as code declares them, topics,
subscriptions and the worker registry (rules 19, 23). A part of ``SqlBackend`` over
``self.dialect``."""

from __future__ import annotations

import json

from hailq.backends.base import (
    QueueRef,
    QueueSaveParams,
    TopicRef,
    WorkerPruneParams,
)
from hailq.backends.dialect import Tx
from hailq.backends.operators import _columns, _follow, _overrides_locked
from hailq.backends.store import Part
from hailq.models import RunningMessage, Subscription, WorkerInfo
from hailq.settings import QueueSettings


class CatalogStore(Part):
    """Topics, subscriptions and workers of the Backend seam, over ``self.dialect``."""

    # -- queues --------------------------------------------------------------------------

    def queue_save(self, params: QueueSaveParams) -> None:
        declared = QueueSettings.from_json(params.settings)

        def save(tx: Tx) -> None:
            with tx.atomic():
                # The columns statements obey are the effective settings: what code
                # declares, with an operator's overrides (kept apart) laid over it.
                effective = declared.overlay(_overrides_locked(tx, params.name)[0])
                tx.exec("queue_save", {**_columns(params.name, effective),
                                       "settings": params.settings, "now": tx.now})
                _follow(tx, params.name, effective, params.resort)
            self.shared.settings.pop(params.name, None)

        self.dialect.work(save, durable=True)

    def queue_get(self, params: QueueRef) -> str | None:
        name = params.queue
        found = self.dialect.read(lambda tx: tx.one("queue_get", {"name": name}))
        return None if found is None else str(found[0])

    def queue_list(self) -> list[tuple[str, str]]:
        return [(str(n), str(s)) for n, s in self.dialect.read(
            lambda tx: tx.run("queue_list", {}))]

    # -- topics --------------------------------------------------------------------------

    def topic_save(self, params: TopicRef) -> None:
        topic = params.topic
        self.dialect.work(lambda tx: tx.exec("topic_save", {"name": topic, "now": tx.now}),
                          durable=True)

    def topic_list(self) -> list[str]:
        return [str(r[0]) for r in self.dialect.read(lambda tx: tx.run("topic_list", {}))]

    def subscription_save(self, subscription: Subscription) -> None:
        args = {"topic": subscription.topic, "queue": subscription.queue,
                "filter": None if subscription.filter is None else json.dumps(
                    subscription.filter, sort_keys=True)}
        self.dialect.work(lambda tx: tx.exec("subscription_save", {**args, "now": tx.now}),
                          durable=True)

    def subscription_list(self, params: TopicRef) -> list[Subscription]:
        topic = params.topic
        return self.dialect.read(lambda tx: self.subscriptions(tx, topic))

    def subscriptions(self, tx: Tx, topic: str) -> list[Subscription]:
        return [Subscription(t, q, None if f is None else json.loads(f))
                for t, q, f in tx.run("subscription_list", {"topic": topic})]

    # -- workers -------------------------------------------------------------------------

    def worker_save(self, worker: WorkerInfo) -> None:
        args = {"id": worker.id, "host": worker.host, "pid": worker.pid,
                "queues": json.dumps(worker.queues), "concurrency": worker.concurrency,
                "in_flight": worker.in_flight, "started_at": worker.started_at,
                "state": worker.state, "running": json.dumps(  # since: seconds ago, here
                    [[r.message_id, r.queue, r.attempt, r.since] for r in worker.running])}
        self.dialect.work(lambda tx: tx.exec("worker_save", {**args, "now": tx.now}),
                          durable=False)

    def worker_list(self) -> list[WorkerInfo]:
        # A slot's start is stored as seconds before the report: on the broker's clock it
        # is the report's time less those.
        return [WorkerInfo(i, h, p, json.loads(q), c, f, s, seen, st,
                           [RunningMessage(m, qu, a, seen - ago)
                            for m, qu, a, ago in json.loads(run or "[]")])
                for i, h, p, q, c, f, s, seen, st, run in self.dialect.read(
                    lambda tx: tx.run("worker_list", {}))]

    def worker_prune(self, params: WorkerPruneParams) -> int:
        before = params.before
        total = 0
        while True:  # bounded statements, each its own short transaction
            deleted = self.dialect.work(
                lambda tx: tx.exec("worker_prune", {"before": before, "limit": 1000}),
                durable=False)
            total += deleted
            if deleted < 1000:
                return total
