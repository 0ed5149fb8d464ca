"""The asyncio API's objects: thin awaitable faces of ``Broker``, ``Queue``, ``Topic``
and ``Message``. Each call runs the sync object's own method (its checks, hooks,
figures and receipts: one implementation) through the broker's driver; only a
waiting receive is the loop's own, since it waits holding no thread."""

from __future__ import annotations

import contextlib
import copy
import functools
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import Any, Generic, TypeVar, cast

from hailq._time import Duration
from hailq.aio.drivers import Driver
from hailq.backends.base import Receipt
from hailq.broker import Broker
from hailq.codec import Body
from hailq.hooks import Hook
from hailq.joined import is_async
from hailq.message import Message
from hailq.models import QueueStats
from hailq.queue import Queue, wait_seconds
from hailq.settings import QueueSettings
from hailq.topic import Topic

S = TypeVar("S")


class _Awaited:
    """An async method: the wrapped sync object's method of the same name, run by the
    driver. For the calls whose answer needs no async face of its own."""

    name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: _Face[Any] | None, owner: type | None = None,
                ) -> Callable[..., Awaitable[Any]]:
        if obj is None:
            return self  # type: ignore[return-value]
        method = getattr(obj.sync, self.name)
        driver = obj.driver

        @functools.wraps(method)
        async def call(*args: Any, **kwargs: Any) -> Any:
            return await driver.run(method, *args, **kwargs)

        return call


class _Field(Generic[S]):
    """A read-only attribute of the wrapped sync object."""

    name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: _Face[Any], owner: type | None = None) -> S:
        return getattr(obj.sync, self.name)  # type: ignore[no-any-return]


class _Face(Generic[S]):
    """What every async object holds: the sync one and the broker's driver."""

    __slots__ = ("driver", "sync")

    def __init__(self, sync: S, driver: Driver) -> None:
        self.sync = sync
        self.driver = driver

    def __repr__(self) -> str:
        return f"<{type(self).__name__} of {self.sync!r}>"


class AsyncMessage(_Face[Message]):
    """A received message (``hailq.Message``) whose settling calls are awaited."""

    __slots__ = ()

    id: _Field[str] = _Field()
    body: _Field[Body] = _Field()
    headers: _Field[dict[str, str]] = _Field()
    priority: _Field[int] = _Field()
    ordering_key: _Field[str | None] = _Field()
    attempt: _Field[int] = _Field()
    enqueued_at: _Field[float] = _Field()
    available_at: _Field[float] = _Field()
    received_at: _Field[float | None] = _Field()
    lease_until: _Field[float] = _Field()
    fencing_token: _Field[int] = _Field()
    receipt: _Field[str] = _Field()
    lease: _Field[Receipt] = _Field()
    queue: _Field[str] = _Field()
    settled: _Field[bool] = _Field()
    source: _Field[Queue] = _Field()

    def settle_back(self, message: Message) -> None:
        """What was done through this message (``AsyncBroker.adopt_message``) settled
        or extended, told to the ``message`` it was adopted from."""
        message.settled = message.settled or self.sync.settled
        message.lease_until = self.sync.lease_until

    def handled(self) -> None:
        """See ``Message.handled``."""
        self.sync.handled()

    async def ack(self) -> None:
        """See ``Message.ack``."""
        await self.driver.run(self.sync.ack)

    async def nack(self, delay: Duration | None = None, error: str | None = None) -> None:
        """See ``Message.nack``."""
        await self.driver.run(self.sync.nack, delay, error)

    async def give_back(self, reason: str | None = None) -> None:
        """See ``Message.give_back``."""
        await self.driver.run(self.sync.give_back, reason)

    async def dead_letter(self, reason: str) -> None:
        """See ``Message.dead_letter``."""
        await self.driver.run(self.sync.dead_letter, reason)

    async def extend(self, seconds: Duration) -> None:
        """See ``Message.extend``."""
        await self.driver.run(self.sync.extend, seconds)

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[Any]:
        """Commit an effect in the broker's database together with the ack (rule 22):
        ``async with message.transaction() as conn:``, as ``Message.transaction``.

        ``conn`` is inside a transaction in which the message is already acked:
        psycopg's ``AsyncConnection`` on PostgreSQL, ``await conn.execute(sql,
        params)``; on SQLite a connection whose ``await conn.execute(sql, params)``
        runs in the thread that holds the transaction (both return a cursor whose
        rows are awaited: ``await cursor.fetchall()``). Leaving the block commits both;
        an exception rolls both back. If the lease was lost, ``LeaseLost`` is raised
        before the block runs and nothing is committed. Do not commit inside it."""
        async with self.driver.hold(self.sync.transaction) as conn:
            # PostgreSQL's is the dialect's sync face of a pooled AsyncConnection.
            yield getattr(conn, "raw", conn)


async def _sending(face: _Face[Any], fn: Callable[..., S], *args: Any, **kwargs: Any) -> S:
    """A send or publish; in the caller's transaction where it names one (rule 3)."""
    connection = kwargs.get("connection")
    if connection is None:
        return await face.driver.sending(fn, *args, **kwargs)
    if not is_async(connection):
        return await face.driver.joined(fn, *args, **kwargs)
    # An asyncio connection: the sync call, run by the driver as every call that may
    # read hailq's own database (a not_before reads its clock), checks the input and
    # hands back the send, awaited here on the caller's connection. The instance id
    # the connection is checked by is read there too, before.
    backend = face.driver.backend

    def prepared() -> Awaitable[S]:
        backend.caller_place().instance()  # read once, then kept
        return cast(Awaitable[S], fn(*args, **kwargs))

    return await (await face.driver.run(prepared))


_SINGLE = (str, bytes, dict, AsyncMessage)


def _plain(items: Any) -> Any:
    """Receipts and messages as the sync queue takes them; what is no batch (a single
    receipt, a message) goes as it is, for the sync call to refuse."""
    if isinstance(items, _SINGLE) or not isinstance(items, Iterable):
        return items
    return [i.sync if isinstance(i, AsyncMessage) else i for i in items]


class AsyncQueue(_Face[Queue]):
    """A queue (``hailq.Queue``) whose calls are awaited; the same names and arguments."""

    __slots__ = ()

    name: _Field[str] = _Field()
    settings: _Field[QueueSettings] = _Field()
    overrides: _Field[dict[str, Any]] = _Field()

    async def send(self, body: Body, *args: Any, **kwargs: Any) -> str:
        """See ``Queue.send``."""
        return await _sending(self, self.sync.send, body, *args, **kwargs)

    async def send_many(self, items: Iterable[Any], **kwargs: Any) -> list[str]:
        """See ``Queue.send_many``."""
        return await _sending(self, self.sync.send_many, items, **kwargs)

    async def receive(self, max_messages: int = 1, lease: Duration | None = None,
                      wait: Duration = 0) -> list[AsyncMessage]:
        """See ``Queue.receive``: a ``wait`` holds no thread while it lasts."""
        deadline = time.monotonic() + wait_seconds(wait)
        while True:
            got = await self.driver.run(self.sync.receive, max_messages, lease)
            remaining = deadline - time.monotonic()
            if got or remaining <= 0:
                return [AsyncMessage(m, self.driver) for m in got]
            await self.driver.wait([self.name], remaining)

    async def ack_and_receive(self, acks: Iterable[AsyncMessage], max_messages: int = 1,
                              lease: Duration | None = None,
                              ) -> tuple[list[bool | None], list[AsyncMessage]]:
        """See ``Queue.ack_and_receive``."""
        acked, got = await self.driver.run(self.sync.ack_and_receive, _plain(acks),
                                           max_messages, lease)
        return acked, [AsyncMessage(m, self.driver) for m in got]

    async def ack(self, receipt: str | AsyncMessage) -> None:
        """See ``Queue.ack``."""
        await self.driver.run(self.sync.ack, *_plain([receipt]))

    @contextlib.asynccontextmanager
    async def ack_transaction(self, receipt: str | AsyncMessage) -> AsyncIterator[Any]:
        """See ``Queue.ack_transaction``: ``AsyncMessage.transaction`` by receipt, for
        a consumer that kept only the receipt."""
        plain = receipt.sync if isinstance(receipt, AsyncMessage) else receipt
        async with self.driver.hold(lambda: self.sync.ack_transaction(plain)) as conn:
            yield getattr(conn, "raw", conn)

    async def ack_many(self, receipts: Iterable[str | AsyncMessage]) -> list[bool | None]:
        """See ``Queue.ack_many``."""
        return await self.driver.run(self.sync.ack_many, _plain(receipts))

    async def nack(self, receipt: str | AsyncMessage, *args: Any, **kwargs: Any) -> None:
        """See ``Queue.nack``."""
        await self.driver.run(self.sync.nack, *_plain([receipt]), *args, **kwargs)

    async def give_back(self, receipt: str | AsyncMessage, reason: str | None = None) -> None:
        """See ``Queue.give_back``."""
        await self.driver.run(self.sync.give_back, *_plain([receipt]), reason)

    async def dead_letter(self, receipt: str | AsyncMessage, reason: str) -> None:
        """See ``Queue.dead_letter``."""
        await self.driver.run(self.sync.dead_letter, *_plain([receipt]), reason)

    async def extend_many(self, receipts: Iterable[str | AsyncMessage],
                          seconds: Duration) -> list[float | None]:
        """See ``Queue.extend_many``."""
        return await self.driver.run(self.sync.extend_many, _plain(receipts), seconds)

    async def cancelled(self, messages: Iterable[AsyncMessage]) -> list[str]:
        """See ``Queue.cancelled``."""
        return await self.driver.run(self.sync.cancelled, _plain(messages))

    async def let_cancelled_go(self, messages: Iterable[AsyncMessage]) -> list[str]:
        """See ``Queue.let_cancelled_go``."""
        return await self.driver.run(self.sync.let_cancelled_go, _plain(messages))

    async def stats(self) -> QueueStats:
        """See ``Queue.stats``."""
        return await self.driver.run(self.sync.stats)

    extend = _Awaited()
    maintain = _Awaited()
    peek = _Awaited()
    dead_letters = _Awaited()
    count_dead_letters = _Awaited()
    redrive = _Awaited()
    purge = _Awaited()
    pause = _Awaited()
    resume = _Awaited()
    configure = _Awaited()
    get_message = _Awaited()
    delete_message = _Awaited()
    figures = _Awaited()
    cancel = _Awaited()
    history = _Awaited()
    finished = _Awaited()


class AsyncTopic(_Face[Topic]):
    """A topic (``hailq.Topic``) whose calls are awaited."""

    __slots__ = ()

    name: _Field[str] = _Field()

    async def subscribe(self, subscription: str, filter: dict[str, Any] | None = None,
                        **settings: Any) -> AsyncQueue:
        """See ``Topic.subscribe``."""
        queue = await self.driver.run(self.sync.subscribe, subscription, filter, **settings)
        return AsyncQueue(queue, self.driver)

    async def publish(self, body: Body, *args: Any, **kwargs: Any) -> dict[str, str]:
        """See ``Topic.publish``."""
        return await _sending(self, self.sync.publish, body, *args, **kwargs)

    async def publish_many(self, items: Iterable[Any], **kwargs: Any) -> list[dict[str, str]]:
        """See ``Topic.publish_many``."""
        return await _sending(self, self.sync.publish_many, items, **kwargs)

    unsubscribe = _Awaited()
    subscriptions = _Awaited()


class AsyncBroker(_Face[Broker]):
    """hailq on one database for one event loop (``await hailq.aio.connect(url)``).

    The broker belongs to the loop it was connected in: a call from another loop
    raises ``WrongEventLoop``. Close it with ``await broker.close()`` (or ``async
    with``); it is never closed by a finalizer."""

    __slots__ = ("shares",)

    url: _Field[str] = _Field()

    def __init__(self, sync: Broker, driver: Driver, shares: bool = False) -> None:
        super().__init__(sync, driver)
        self.shares = shares  # its figures recorder is a sync broker's (``beside``)

    @property
    def loop(self) -> Any:
        return self.driver.loop

    async def queue(self, name: str, **settings: Any) -> AsyncQueue:
        """See ``Broker.queue``."""
        return AsyncQueue(await self.driver.run(self.sync.queue, name, **settings),
                          self.driver)

    def adopt(self, queue: Queue) -> AsyncQueue:
        """``queue`` (of a sync broker on the same database, with the settings it read)
        on this broker, without a look at the database."""
        mine = self.sync
        return AsyncQueue(Queue(mine.backend, queue.name, queue.settings, queue.overrides,
                                mine.figures, mine.hooks), self.driver)

    def adopt_message(self, message: Message) -> AsyncMessage:
        """A message a sync broker on the same database received, on this broker (a
        worker's async handler gets it so); ``settle_back`` tells the original what the
        handler did with it."""
        twin = copy.copy(message)
        twin._queue = self.adopt(message.source).sync
        return AsyncMessage(twin, self.driver)

    async def get_queue(self, name: str) -> AsyncQueue:
        """See ``Broker.get_queue``."""
        return AsyncQueue(await self.driver.run(self.sync.get_queue, name), self.driver)

    async def queues(self) -> list[AsyncQueue]:
        """See ``Broker.queues``."""
        return [AsyncQueue(q, self.driver) for q in await self.driver.run(self.sync.queues)]

    async def configure(self, name: str, *, reset: bool = False,
                        **settings: Any) -> AsyncQueue:
        """See ``Broker.configure``."""
        queue = await self.driver.run(self.sync.configure, name, reset=reset, **settings)
        return AsyncQueue(queue, self.driver)

    async def topic(self, name: str) -> AsyncTopic:
        """See ``Broker.topic``."""
        return AsyncTopic(await self.driver.run(self.sync.topic, name), self.driver)

    async def get_topic(self, name: str) -> AsyncTopic:
        """See ``Broker.get_topic``."""
        return AsyncTopic(await self.driver.run(self.sync.get_topic, name), self.driver)

    async def wait(self, queues: Sequence[str], timeout: float) -> None:
        """See ``Broker.wait``; holds no thread while it waits."""
        await self.driver.wait(list(queues), timeout)

    def add_hook(self, hook: Hook) -> Hook:
        """See ``Broker.add_hook``: the hook runs around this broker's sends and
        publishes (its list is the sync broker's; nothing is awaited)."""
        return self.sync.add_hook(hook)

    async def close(self) -> None:
        """Write this process's figures, then close the broker's connections."""
        self.driver.check_loop()
        figures = self.sync.figures
        if figures is not None and not self.shares:
            # Its flusher thread may be in a call handed to this loop: closed in a thread.
            await self.driver.loop.run_in_executor(None, figures.close)
        await self.driver.close()

    async def __aenter__(self) -> AsyncBroker:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    migrate = _Awaited()
    delete_queue = _Awaited()
    delete_topic = _Awaited()
    topics = _Awaited()
    overview = _Awaited()
    workers = _Awaited()
    maintain = _Awaited()
    now = _Awaited()
    schema_status = _Awaited()
    autoscalers = _Awaited()
    autoscale_decisions = _Awaited()
    schedule = _Awaited()
    schedules = _Awaited()
    get_schedule = _Awaited()
    pause_schedule = _Awaited()
    resume_schedule = _Awaited()
    remove_schedule = _Awaited()
    delete_schedule = _Awaited()
    levels = _Awaited()
    cancel = _Awaited()
    history = _Awaited()
