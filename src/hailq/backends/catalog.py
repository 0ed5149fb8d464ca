"""The catalog of the storage core: topics, subscriptions and the worker registry
(rules 19, 23). A mixin of ``SqlBackend`` over ``self.dialect``."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from hailq.models import Subscription, WorkerInfo

if TYPE_CHECKING:
    from hailq.backends.dialect import Dialect, Tx


class CatalogStore:
    """Topics, subscriptions and workers of the Backend seam, over ``self.dialect``."""

    dialect: Dialect

    # -- topics --------------------------------------------------------------------------

    def topic_save(self, topic: str) -> None:
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

    def subscription_list(self, topic: str) -> list[Subscription]:
        return self.dialect.read(lambda tx: self._subscriptions(tx, topic))

    def _subscriptions(self, tx: Tx, topic: str) -> list[Subscription]:
        return [Subscription(t, q, None if f is None else json.loads(f))
                for t, q, f in tx.run("subscription_list", {"topic": topic})]

    # -- workers -------------------------------------------------------------------------

    def worker_save(self, worker: WorkerInfo) -> None:
        args = {"id": worker.id, "host": worker.host, "pid": worker.pid,
                "queues": json.dumps(worker.queues), "concurrency": worker.concurrency,
                "in_flight": worker.in_flight, "started_at": worker.started_at,
                "state": worker.state}
        self.dialect.work(lambda tx: tx.exec("worker_save", {**args, "now": tx.now}),
                          durable=False)

    def worker_list(self) -> list[WorkerInfo]:
        return [WorkerInfo(i, h, p, json.loads(q), c, f, s, seen, st)
                for i, h, p, q, c, f, s, seen, st in self.dialect.read(
                    lambda tx: tx.run("worker_list", {}))]

    def worker_prune(self, before: float) -> int:
        return self.dialect.work(lambda tx: tx.exec("worker_prune", {"before": before}),
                                 durable=False)
