"""Publish/subscribe: a topic copies each message into every subscription's queue (rules 19-20)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Iterable
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, overload

from hailq._time import Duration
from hailq.backends.base import (
    PublishParams,
    SubscriptionDeleteParams,
    TopicRef,
)
from hailq.checks import Envelope, build_message, check_batch
from hailq.codec import Body, check_plain_text
from hailq.errors import InvalidArgument, SubscriptionNotFound
from hailq.hooks import sending
from hailq.ids import new_message_id
from hailq.joined import is_async, publish_joined_async
from hailq.models import Subscription
from hailq.queue import Queue
from hailq.settings import check_name

if TYPE_CHECKING:
    from hailq.backends.base import NewMessage
    from hailq.broker import Broker
    from hailq.connections import AsyncCaller

Copies = tuple[Callable[[list[Subscription]], list["NewMessage"]],
               Callable[[list[str]], list[dict[str, str]]]]


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
        self._broker.backend.subscription_save(
            Subscription(self.name, subscription, checked))
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
        return self._broker.backend.subscription_list(TopicRef(self.name))

    @overload
    def publish(self, body: Body, priority: int = 0, ordering_key: str | None = None,
                delay: Duration = 0, headers: dict[str, str] | None = None,
                dedup_id: str | None = None, *,
                not_before: datetime | float | None = None,
                connection: AsyncCaller) -> Awaitable[dict[str, str]]: ...
    @overload
    def publish(self, body: Body, priority: int = 0, ordering_key: str | None = None,
                delay: Duration = 0, headers: dict[str, str] | None = None,
                dedup_id: str | None = None, *,
                not_before: datetime | float | None = None,
                connection: Any = None) -> dict[str, str]: ...
    def publish(self, body: Body, priority: int = 0, ordering_key: str | None = None,
                delay: Duration = 0, headers: dict[str, str] | None = None,
                dedup_id: str | None = None, *,
                not_before: datetime | float | None = None,
                connection: Any = None) -> Any:
        """Copy one message into every subscription that exists now, atomically.

        Returns ``{subscription: message id}``; subscriptions whose filter does
        not match get nothing. Every copy has the same body, priority, ordering
        key and headers. With ``connection`` (an open transaction on the broker's
        database, any connection ``Queue.send`` accepts), the copies join that
        transaction: every copy exists if and only if it commits (the outbox, rule 3).
        On an asyncio connection the call returns an awaitable.
        """
        envelope = Envelope(body, priority, ordering_key, delay, headers, dedup_id, not_before)
        if connection is not None and is_async(connection):
            return _first(self._publish_awaited([envelope], connection))
        return self.publish_many([envelope], connection=connection)[0]

    @overload
    def publish_many(self, items: Iterable[Body | Envelope], *,
                     connection: AsyncCaller) -> Awaitable[list[dict[str, str]]]: ...
    @overload
    def publish_many(self, items: Iterable[Body | Envelope], *,
                     connection: Any = None) -> list[dict[str, str]]: ...
    def publish_many(self, items: Iterable[Body | Envelope], *,
                     connection: Any = None) -> Any:
        """Publish a batch atomically, all or none: one transaction for every copy.

        Items are bodies or ``Envelope``s; returns, per item, ``{subscription:
        message id}`` as ``publish`` does. ``connection`` as for ``publish``.
        """
        envelopes = [i if isinstance(i, Envelope) else Envelope(i)
                     for i in check_batch(items, "publish_many")]
        if connection is not None and is_async(connection):
            return self._publish_awaited(envelopes, connection)
        hooks = self._broker.hooks
        if not hooks or not envelopes:
            return self._publish(envelopes, connection)
        with sending(hooks, self.name, "publish") as call:
            envelopes = [replace(e, headers=call.headers(e.headers)) for e in envelopes]
            result = self._publish(envelopes, connection)
            call.done([i for copies in result for i in copies.values()])
        return result

    def _publish_awaited(self, envelopes: list[Envelope], connection: Any,
                         ) -> Coroutine[Any, Any, list[dict[str, str]]]:
        """A publish in an asyncio connection's transaction; bad input raises here."""
        place, hooks = self._broker.backend.caller_place(), self._broker.hooks
        made = None if hooks else self._copies(envelopes)

        async def publish(made: Copies | None) -> list[dict[str, str]]:
            if not envelopes:
                return []
            if made is not None:
                build, result = made
                return result(await publish_joined_async(place, connection, self.name, build))
            with sending(hooks, self.name, "publish") as call:
                build, result = self._copies([replace(e, headers=call.headers(e.headers))
                                              for e in envelopes])
                done = result(await publish_joined_async(place, connection, self.name, build))
                call.done([i for copies in done for i in copies.values()])
            return done

        return publish(made)

    def _publish(self, envelopes: list[Envelope], connection: Any) -> list[dict[str, str]]:
        build, result = self._copies(envelopes)
        return result(self._broker.backend.topic_publish(
            PublishParams(self.name, build, connection)) if envelopes else [])

    def _copies(self, envelopes: list[Envelope]) -> Copies:
        """What builds the copies from the subscriptions read inside the transaction, and
        what maps the ids sent back to ``{subscription: message id}`` per envelope."""
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
                        built.append((n, message._replace(queue=s.queue,
                                                          id=new_message_id())))
            return [m for _, m in built]

        def result(ids: list[str]) -> list[dict[str, str]]:
            found: list[dict[str, str]] = [{} for _ in envelopes]
            for (n, message), message_id in zip(built, ids, strict=True):
                found[n][message.queue] = message_id
            return found

        return copies, result

    def __repr__(self) -> str:
        return f"<Topic {self.name}>"


async def _first(copies: Awaitable[list[dict[str, str]]]) -> dict[str, str]:
    return (await copies)[0]


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
