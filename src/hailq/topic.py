"""Publish/subscribe: a topic copies each message into every subscription's queue (rules 19-20)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from hailq._time import Duration
from hailq.backends.base import (
    PublishParams,
    SubscriptionDeleteParams,
    SubscriptionListParams,
    SubscriptionSaveParams,
)
from hailq.checks import Envelope, build_message, check_batch
from hailq.codec import Body, check_plain_text
from hailq.errors import InvalidArgument, SubscriptionNotFound
from hailq.hooks import sending
from hailq.ids import new_message_id
from hailq.models import Subscription
from hailq.queue import Queue
from hailq.settings import check_name

if TYPE_CHECKING:
    from hailq.backends.base import NewMessage
    from hailq.broker import Broker


class Topic:
    """A named fan-out point. Get one with ``broker.topic(name)``."""

    def __init__(self, broker: Broker, name: str) -> None:
        self._broker = broker
        self.name = name

    def subscribe(self, subscription: str, filter: dict[str, Any] | None = None,
                  **settings: Any) -> Queue:
        """Create (or update) a subscription and return its queue.

        The subscription is an ordinary queue named ``subscription`` with its
        own settings, leases, attempts and dead letters. ``filter`` maps header
        names to a value or a list of accepted values; only matching messages
        are copied in.
        """
        check_name(subscription, "subscription name")
        checked = check_filter(filter)
        queue = self._broker.queue(subscription, **settings)
        self._broker.backend.subscription_save(SubscriptionSaveParams(
            Subscription(self.name, subscription, checked)))
        return queue

    def unsubscribe(self, subscription: str) -> None:
        """Stop copying this topic's messages into ``subscription``. Its queue stays, an
        ordinary queue with the messages it holds (``broker.delete_queue`` deletes it).
        SubscriptionNotFound if it was no subscription of this topic."""
        check_name(subscription, "subscription name")
        if not self._broker.backend.subscription_delete(
                SubscriptionDeleteParams(self.name, subscription)):
            raise SubscriptionNotFound(
                f"{subscription!r} is no subscription of topic {self.name!r}; "
                "'hailq topics' lists them")

    def subscriptions(self) -> list[Subscription]:
        return self._broker.backend.subscription_list(SubscriptionListParams(self.name))

    def publish(self, body: Body, priority: int = 0, ordering_key: str | None = None,
                delay: Duration = 0, headers: dict[str, str] | None = None,
                dedup_id: str | None = None, *,
                not_before: datetime | float | None = None,
                connection: Any = None) -> dict[str, str]:
        """Copy one message into every subscription that exists now, atomically.

        Returns ``{subscription: message id}``; subscriptions whose filter does
        not match get nothing. Every copy has the same body, priority, ordering
        key and headers. With ``connection`` (an open transaction on the broker's
        database, as for ``Queue.send``), the copies join that transaction: every
        copy exists if and only if it commits (the outbox, rule 3).
        """
        envelope = Envelope(body, priority, ordering_key, delay, headers, dedup_id, not_before)
        return self.publish_many([envelope], connection=connection)[0]

    def publish_many(self, items: Iterable[Body | Envelope], *,
                     connection: Any = None) -> list[dict[str, str]]:
        """Publish a batch atomically, all or none: one transaction for every copy.

        Items are bodies or ``Envelope``s; returns, per item, ``{subscription:
        message id}`` as ``publish`` does. ``connection`` as for ``publish``.
        """
        envelopes = [i if isinstance(i, Envelope) else Envelope(i)
                     for i in check_batch(items, "publish_many")]
        hooks = self._broker.hooks
        if not hooks or not envelopes:
            return self._publish(envelopes, connection)
        with sending(hooks, self.name, "publish") as call:
            envelopes = [replace(e, headers=call.headers(e.headers)) for e in envelopes]
            result = self._publish(envelopes, connection)
            call.done([i for copies in result for i in copies.values()])
        return result

    def _publish(self, envelopes: list[Envelope], connection: Any) -> list[dict[str, str]]:
        backend = self._broker.backend
        # Bad input fails even with no subscriptions. Each copy is held to its queue's
        # settings (max_message_size, dedup window, aging) as the queue's row holds
        # them where the copies are stored, operators' overrides included (rule 39).
        checked = [build_message(self.name, e, backend.clock_now) for e in envelopes]
        built: list[tuple[int, NewMessage]] = []

        def copies(subs: list[Subscription]) -> list[NewMessage]:
            built.clear()
            for n, (e, message) in enumerate(zip(envelopes, checked, strict=True)):
                for s in subs:
                    if s.matches(dict(e.headers or {})):
                        built.append((n, replace(message, queue=s.queue,
                                                 id=new_message_id())))
            return [m for _, m in built]

        ids = (backend.topic_publish(PublishParams(self.name, copies, connection))
               if envelopes else [])
        result: list[dict[str, str]] = [{} for _ in envelopes]
        for (n, message), message_id in zip(built, ids, strict=True):
            result[n][message.queue] = message_id
        return result

    def __repr__(self) -> str:
        return f"<Topic {self.name}>"


def check_filter(filter: object) -> dict[str, str | list[str]] | None:
    """A subscription's filter, checked: header name -> value or list of values."""
    if filter is None:
        return None
    if not isinstance(filter, dict) or not filter:
        raise InvalidArgument("filter must be a non-empty dict of header name to value(s)")
    checked: dict[str, str | list[str]] = {}
    for name, wanted in filter.items():
        if not isinstance(name, str) or not name:
            raise InvalidArgument(f"filter header names must be non-empty strings, got {name!r}")
        check_plain_text(name, "filter header name")
        if isinstance(wanted, str):
            checked[name] = wanted
        elif isinstance(wanted, list | tuple) and wanted and all(isinstance(v, str)
                                                                   for v in wanted):
            checked[name] = list(wanted)
        else:
            raise InvalidArgument(
                f"filter value for {name!r} must be a string or a non-empty list of strings")
        for value in [wanted] if isinstance(wanted, str) else wanted:
            # Header values can never hold these, so such a filter could never match.
            check_plain_text(value, f"filter value for {name!r}")
    return checked
