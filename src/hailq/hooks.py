"""Hooks: your code around every handler run and every send (tracing, metrics, a request id).

Subclass ``Hook`` and override what you need; register it with ``app.hook(h)`` (handler
runs, in every worker of the app, process pools included) or ``hailq.connect(url,
hooks=[h])`` / ``broker.add_hook(h)`` (``Queue.send``, ``send_many``, ``Topic.publish``,
``publish_many``).

Order, for hooks registered as A then B: ``around_*`` contexts are entered A, B and left
B, A; ``before_*`` run A, B; ``after_*`` and ``on_failure`` run B, A, inside the contexts.

The rule for a hook's own failure: an exception raised by a hook method (``Exception``,
not ``BaseException``) is logged on the ``hailq.hooks`` logger with the hook's name and
the method, and is otherwise ignored. The handler still runs and its message is acked,
retried or dead-lettered exactly as the handler decided; the send still happens with
the headers as the failing hook found them (so does a hook that leaves headers hailq
cannot store). An ``around_*`` context that fails to enter is skipped; one that fails
to leave is logged. A hook cannot swallow a handler's exception: what an ``around_*``
context's ``__exit__`` returns is ignored.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any

from hailq.codec import encode_headers
from hailq.errors import HailqError, InvalidArgument

if TYPE_CHECKING:
    from hailq.message import Message

__all__ = ["Hook", "check_hook", "run_handler", "sending"]

log = logging.getLogger("hailq.hooks")


class Hook:
    """Code around handler runs and sends; every method does nothing unless overridden.

    Handler methods run in the worker's slot thread, for plain and ``async def``
    handlers alike; an async handler runs in a copy of the slot thread's context taken
    after ``around_handler`` was entered, so a ``contextvars.ContextVar`` set there
    (a request id, the current tracing span) is set inside the coroutine too.
    """

    @property
    def name(self) -> str:
        """How logs name this hook: its class name."""
        return type(self).__name__

    def around_handler(self, message: Message) -> AbstractContextManager[Any] | None:
        """A context manager to keep entered while the handler (and the other handler
        hooks) run, or None. Its ``__exit__`` sees the handler's exception, if any."""
        return None

    def before_handler(self, message: Message) -> None:
        """Called before the handler runs."""

    def after_handler(self, message: Message) -> None:
        """Called after the handler returned (before its ack is recorded)."""

    def on_failure(self, message: Message, error: BaseException) -> None:
        """Called after the handler raised ``error`` (``Retry`` and ``DeadLetter``
        included), before the nack or dead letter is recorded."""

    def around_send(self, destination: str, operation: str) -> AbstractContextManager[Any] | None:
        """A context manager to keep entered during one send call, or None.
        ``destination`` is the queue (``operation`` "send") or topic ("publish")."""
        return None

    def before_send(self, destination: str, headers: dict[str, str]) -> None:
        """Called once per outgoing message, before it is written: change ``headers``
        in place to add or change headers (they travel with the message)."""

    def after_send(self, destination: str, ids: list[str]) -> None:
        """Called once per send call after the messages were written (inside the
        caller's transaction when a ``connection`` was given), with their ids: one per
        message for a send, one per copy for a publish."""


def check_hook(hook: object) -> Hook:
    """``hook`` if it is a ``Hook``; InvalidArgument otherwise."""
    if not isinstance(hook, Hook):
        raise InvalidArgument(f"a hook must be an instance of a hailq.Hook subclass, got "
                              f"{type(hook).__name__}")
    return hook


def _ok(hook: Hook, method: str, args: tuple[Any, ...], where: object) -> bool:
    """Run one hook method, unless it is ``Hook``'s no-op; log and swallow its
    ``Exception``; True if it returned."""
    if getattr(type(hook), method) is getattr(Hook, method):
        return True
    try:
        getattr(hook, method)(*args)
        return True
    except Exception:
        log.exception("hook %s failed in %s %s; ignored, the message is not affected",
                      hook.name, method, where)
        return False


class _About:
    """Names a message in a log line, formatted only if a line is written."""

    __slots__ = ("message",)

    def __init__(self, message: Message) -> None:
        self.message = message

    def __str__(self) -> str:
        return f"for message {self.message.id} of queue {self.message.queue}"


Entered = list[tuple[Hook, AbstractContextManager[Any]]]


def _enter(hooks: Sequence[Hook], method: str,
           make: Callable[[Hook], AbstractContextManager[Any] | None], where: object,
           ) -> Entered:
    entered: Entered = []
    for hook in hooks:
        try:
            manager = make(hook)
            if manager is None:
                continue
            manager.__enter__()
        except Exception:
            log.exception("hook %s failed in %s %s; ignored, the message is not affected",
                          hook.name, method, where)
            continue
        entered.append((hook, manager))
    return entered


def _leave(entered: Entered, method: str, error: BaseException | None,
           where: object) -> None:
    for hook, manager in reversed(entered):
        try:
            if error is None:
                manager.__exit__(None, None, None)
            else:
                manager.__exit__(type(error), error, error.__traceback__)
        except BaseException as exc:
            if exc is error:
                continue  # a context re-raising what it was given, as it may
            if not isinstance(exc, Exception):
                raise
            log.exception("hook %s failed leaving %s %s; ignored, the message is not "
                          "affected", hook.name, method, where)


def run_handler(hooks: Sequence[Hook], message: Message, call: Callable[[], None]) -> None:
    """Run ``call`` (the handler) with the handler hooks around it; raises what it raised."""
    if not hooks:
        call()
        return
    where = _About(message)
    entered = _enter(hooks, "around_handler", lambda h: h.around_handler(message), where)
    error: BaseException | None = None
    try:
        for hook in hooks:
            _ok(hook, "before_handler", (message,), where)
        try:
            call()
        except BaseException as exc:
            for hook in reversed(hooks):
                _ok(hook, "on_failure", (message, exc), where)
            raise
        for hook in reversed(hooks):
            _ok(hook, "after_handler", (message,), where)
    except BaseException as exc:
        error = exc
        raise
    finally:
        _leave(entered, "around_handler", error, where)


class Sending:
    """One send call under way: each message's headers, then its ids."""

    def __init__(self, hooks: Sequence[Hook], destination: str) -> None:
        self._hooks = hooks
        self._destination = destination
        self.where = f"for a send to {destination}"

    def headers(self, given: dict[str, str] | None) -> dict[str, str] | None:
        """The headers of one outgoing message after every ``before_send`` (``given``
        is not changed). A hook's change that hailq cannot store (not text, too long,
        too many) is logged and undone."""
        if given is not None and not isinstance(given, dict):
            return given  # the caller's mistake: refused as without hooks
        current = dict(given or {})
        for hook in self._hooks:
            changed = dict(current)
            if not _ok(hook, "before_send", (self._destination, changed), self.where) \
                    or changed == current:
                continue
            try:
                encode_headers(changed)
            except HailqError as exc:
                log.error("hook %s left headers hailq cannot store %s (%s); its change "
                          "is ignored", hook.name, self.where, exc)
                continue
            current = changed
        return current if current or given is not None else None

    def done(self, ids: list[str]) -> None:
        """Call every ``after_send`` with the ids written."""
        for hook in reversed(self._hooks):
            _ok(hook, "after_send", (self._destination, list(ids)), self.where)


@contextmanager
def sending(hooks: Sequence[Hook], destination: str, operation: str) -> Iterator[Sending]:
    """The send hooks around one send call (``around_send`` entered, ``after_send`` by
    ``Sending.done``)."""
    call = Sending(hooks, destination)
    entered = _enter(hooks, "around_send", lambda h: h.around_send(destination, operation),
                     call.where)
    try:
        yield call
    except BaseException as exc:
        _leave(entered, "around_send", exc, call.where)
        raise
    _leave(entered, "around_send", None, call.where)
