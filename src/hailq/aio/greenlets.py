"""Sync-looking code driven by an event loop: the storage core runs once, written as
plain calls, and an async caller drives it.

``spawn(fn, *args)`` runs ``fn`` in a greenlet of its own; wherever ``fn``'s code
reaches the driver (``await_only(coro)``), the greenlet switches back to the
coroutine that spawned it, which awaits ``coro`` on the event loop and switches in
again with its result or its exception. So the PostgreSQL dialect's SQL, its retry
policy and its deadlines are the same code for a sync pool and an async one. The
greenlets are kept between calls (``_work``): a new one for every call cost more
than the statement's own work on the client.

Code that is not inside ``spawn`` (a background thread of the broker's, such as the
figures' flusher) hands the coroutine to the loop and blocks its own thread for the
answer; on the loop's own thread outside ``spawn`` that would wait for ever, so it is
refused with ``SyncCallOnLoop``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

import greenlet

from hailq.aio.drivers import SyncCallOnLoop

T = TypeVar("T")


class _Driven(greenlet.greenlet):  # type: ignore[misc]
    """A greenlet ``spawn`` started: ``await_only`` inside it switches to its parent."""

    __slots__ = ()


async def spawn(fn: Callable[..., T], *args: Any) -> T:
    """Run ``fn(*args)`` to its end, awaiting on this loop every coroutine it hands to
    ``await_only``; its result, or its exception raised here."""
    idle = _idle()
    if idle:
        child = idle.pop()
        child.parent = greenlet.getcurrent()
        child.gr_context = None  # each call starts in a context of its own, empty
    else:
        child = _Driven(_work, parent=greenlet.getcurrent())
    done: Any = await drive(child, child.switch(fn, args))
    if isinstance(done, Entered):  # only a held block (aio/held.py) may pause
        raise RuntimeError("pause() inside spawn(): use driven_child and drive")
    value, error = done.value, done.error
    done.value = done.error = None  # nothing of this call kept alive by an idle greenlet
    if len(idle) < _KEEP_IDLE:
        idle.append(child)
    if error is not None:
        raise error
    return value  # type: ignore[no-any-return]


_KEEP_IDLE = 64  # greenlets kept per thread for the next calls (more are made as needed)
_local = threading.local()


def _idle() -> list[greenlet.greenlet]:
    """This thread's greenlets waiting for a call (a greenlet serves one thread)."""
    try:
        return _local.idle  # type: ignore[no-any-return]
    except AttributeError:
        _local.idle = []
        return _local.idle  # type: ignore[no-any-return]


class _Done:
    """What a kept greenlet hands over when its call ended: a value or an exception."""

    __slots__ = ("error", "value")

    def __init__(self, value: Any, error: BaseException | None) -> None:
        self.value, self.error = value, error


def _work(fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    """A kept greenlet: runs each call ``spawn`` switches in with, hands over its end
    (``_Done``), and waits for the next."""
    while True:
        error: BaseException | None = None
        try:
            value = fn(*args)
        except greenlet.GreenletExit:
            raise  # collected mid-call (its coroutine was dropped): this greenlet ends
        except BaseException as exc:  # handed to the spawning coroutine, raised there
            value, error = None, exc
        fn = args = None  # type: ignore[assignment]
        done = _Done(value, error)
        value = error = None
        fn, args = greenlet.getcurrent().parent.switch(done)


class Entered:
    """What a greenlet hands over when it pauses in the middle (``pause``): a value,
    not a coroutine to await."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


_ENDS = (Entered, _Done)


async def drive(child: greenlet.greenlet, result: Any) -> Any:
    """Await every coroutine ``child`` hands over, from ``result`` on, until it ends
    (its result; a kept greenlet's ``_Done``) or pauses (an ``Entered``)."""
    while not isinstance(result, _ENDS) and not child.dead:
        try:
            value = await result  # a coroutine the child hands over
        except BaseException as exc:  # handed back into the child as raised
            result = child.throw(exc)
        else:
            result = child.switch(value)
    return result


def driven_child(fn: Callable[[], Any]) -> greenlet.greenlet:
    """A greenlet for ``fn`` whose ``await_only`` calls ``drive`` awaits."""
    return _Driven(fn, parent=greenlet.getcurrent())


def pause(value: Any) -> Any:
    """From inside a driven greenlet: hand ``value`` over and wait for ``resume``."""
    return greenlet.getcurrent().parent.switch(Entered(value))


def resume(child: greenlet.greenlet, value: Any) -> Any:
    """Go on with a paused ``child`` (``pause`` returns ``value``) from this greenlet;
    what it hands over next, for ``drive``."""
    child.parent = greenlet.getcurrent()
    return child.switch(value)


def driven() -> bool:
    """True inside ``spawn``: sync code whose waits the spawning coroutine awaits."""
    return isinstance(greenlet.getcurrent(), _Driven)


def await_only(coro: Awaitable[T], loop: asyncio.AbstractEventLoop | None = None) -> T:
    """The result of ``coro``, from sync code: inside ``spawn``, awaited by the spawning
    coroutine; in another thread, on ``loop`` (the owner's), this thread waiting."""
    current = greenlet.getcurrent()
    if isinstance(current, _Driven):
        return current.parent.switch(coro)  # type: ignore[no-any-return]
    if loop is None or loop.is_closed():
        _close(coro)
        raise SyncCallOnLoop("an async hailq broker was called without await, and not "
                             "from its event loop's tasks: await its methods")
    if _on_loop_thread(loop):
        _close(coro)
        raise SyncCallOnLoop("a sync call reached an async hailq broker on its own event "
                             "loop: it would block the loop; await the async method")
    return asyncio.run_coroutine_threadsafe(_coroutine(coro), loop).result()


def _on_loop_thread(loop: asyncio.AbstractEventLoop) -> bool:
    return getattr(loop, "_thread_id", None) == threading.get_ident()


async def _coroutine(awaitable: Awaitable[T]) -> T:
    return await awaitable


def _close(coro: Awaitable[Any]) -> None:
    if isinstance(coro, Coroutine):
        coro.close()  # never awaited: no warning about it
