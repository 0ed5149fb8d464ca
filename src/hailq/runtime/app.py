"""Handlers and where they come from: ``App``, its routes, and ``module:attr`` targets."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from hailq._time import Duration
from hailq.codec import Body
from hailq.errors import InvalidArgument
from hailq.hooks import Hook, check_hook
from hailq.queue import Message
from hailq.runtime.timelimit import check_time_limit
from hailq.settings import QueueSettings, check_name

if TYPE_CHECKING:
    from hailq.schedule import Periodic

Handler = Callable[[Message], Any]
"""A handler takes the received ``hailq.Message``; it may be a plain function or ``async def``.

Returning acks the message; raising nacks it (``hailq.Retry`` and
``hailq.DeadLetter`` choose the delay or dead-letter it now; SPEC rule 23).
"""


@dataclass(frozen=True)
class Route:
    """One queue, its handler, and the queue settings to declare before consuming it."""

    queue: str
    handler: Handler
    settings: Mapping[str, Any] = field(default_factory=dict)
    time_limit: float | None = None  # seconds; None: the worker's --time-limit, if any
    # A subscriber's queue is its subscription of this topic, with this filter (rule 19).
    topic: str | None = None
    filter: Mapping[str, str | list[str]] | None = None


class App:
    """A set of handlers, one per queue, registered with ``@app.handler(queue, **settings)``.

    >>> app = App()
    >>> @app.handler("claims", lease=300, max_attempts=5, time_limit=120)
    ... def check_claim(message): ...

    Settings are queue settings (``lease``, ``max_attempts``, ``retry`` ...);
    the worker declares each queue with them (``broker.queue(name, **settings)``)
    before it consumes. ``time_limit`` is the handler's own: past that many
    seconds an attempt fails with a "time limit" error (SPEC rule 34; see
    ``hailq.runtime.timelimit``); without it the worker's ``time_limit`` applies.
    Unknown names and bad values raise ``InvalidArgument`` when the handler is
    declared, not when the worker starts.
    """

    def __init__(self, name: str = "hailq") -> None:
        self.name = name
        self._routes: dict[str, Route] = {}
        self._periodics: dict[str, Periodic] = {}
        self._hooks: list[Hook] = []

    def hook(self, hook: Hook) -> Hook:
        """Run ``hook``'s handler methods (``around_handler``, ``before_handler``,
        ``after_handler``, ``on_failure``) around every handler of this app, after the
        hooks added before it; returns it. Every worker of the app runs them, each child
        of a process pool too (it imports the app). InvalidArgument unless it is a
        ``hailq.Hook``. See ``hailq.hooks`` for the order and what a failing hook does."""
        self._hooks.append(check_hook(hook))
        return hook

    @property
    def hooks(self) -> list[Hook]:
        """The hooks added with ``hook``, in order."""
        return list(self._hooks)

    def handler(self, queue: str, *, time_limit: Duration | None = None,
                **settings: Any) -> Callable[[Handler], Handler]:
        """Register the decorated function as the handler of ``queue``; returns it unchanged."""
        check_name(queue)
        limit = check_time_limit(time_limit)
        QueueSettings.build(None, **settings)  # validates names and values now
        if queue in self._routes:
            raise InvalidArgument(f"queue {queue!r} already has a handler in app {self.name!r}; "
                                  "one handler per queue")

        def register(function: Handler) -> Handler:
            if not callable(function):
                raise InvalidArgument(f"a handler must be callable, got {function!r}")
            self._routes[queue] = Route(queue, function, dict(settings), limit)
            return function

        return register

    def subscriber(self, topic: str, subscription: str, *,
                   filter: dict[str, Any] | None = None, time_limit: Duration | None = None,
                   **settings: Any) -> Callable[[Handler], Handler]:
        """Register the decorated function as the consumer of ``subscription`` of ``topic``
        (seed 004): the worker declares the topic and the subscription (idempotently,
        with ``filter`` and the queue ``settings``) before it consumes the subscription's
        queue, which is named ``subscription``. A publish reaches only subscriptions that
        exist (rule 19): run ``hailq declare TARGET`` before producers start. Returns the
        function unchanged."""
        from hailq.topic import check_filter

        check_name(topic, "topic name")
        checked = check_filter(filter)
        register = self.handler(subscription, time_limit=time_limit, **settings)

        def subscribe(function: Handler) -> Handler:
            register(function)
            self._routes[subscription] = replace(self._routes[subscription], topic=topic,
                                                 filter=checked)
            return function

        return subscribe

    def add(self, queue: str, function: Handler, *, time_limit: Duration | None = None,
            **settings: Any) -> None:
        """Register ``function`` for ``queue`` without the decorator."""
        self.handler(queue, time_limit=time_limit, **settings)(function)

    def periodic(self, cron: str | None = None, *, every: Duration | None = None, queue: str,
                 body: Body, name: str | None = None, timezone: str = "UTC",
                 catch_up: int = 0, headers: dict[str, str] | None = None,
                 priority: int = 0) -> Periodic:
        """Declare a periodic message (SPEC rule 35): ``body`` is sent to ``queue`` at each
        slot of the 5-field ``cron`` expression in ``timezone``, or every ``every``
        seconds. Every worker of this app runs a scheduler (unless ``--no-scheduler``)
        and each slot is sent once however many run. The name (by default the queue and
        the timing) is its identity. Bad values raise InvalidArgument here. See
        docs/guides/periodic.md."""
        from hailq.schedule import periodic

        declared = periodic(cron, every=every, queue=queue, body=body, name=name,
                            timezone=timezone, catch_up=catch_up, headers=headers,
                            priority=priority)
        if declared.name in self._periodics:
            raise InvalidArgument(f"app {self.name!r} already has a schedule named "
                                  f"{declared.name!r}; give each one its own name=")
        self._periodics[declared.name] = declared
        return declared

    @property
    def periodics(self) -> list[Periodic]:
        """The schedules declared with ``periodic``, in order."""
        return list(self._periodics.values())

    @property
    def queues(self) -> list[str]:
        """The queues with a handler, in the order they were registered."""
        return list(self._routes)

    def route(self, queue: str) -> Route:
        """The route of ``queue``; InvalidArgument if it has no handler."""
        try:
            return self._routes[queue]
        except KeyError:
            raise InvalidArgument(
                f"app {self.name!r} has no handler for queue {queue!r}; "
                f"it handles: {', '.join(self._routes) or 'nothing'}") from None

    def __iter__(self) -> Iterator[Route]:
        return iter(self._routes.values())

    def __len__(self) -> int:
        return len(self._routes)

    def __repr__(self) -> str:
        return f"<App {self.name} queues={self.queues}>"


def app_for(handlers: App | Mapping[str, Handler] | Handler,
            queues: list[str] | None = None) -> App:
    """Normalise what a worker was given into an App.

    A single function needs ``queues``: it handles each of them.
    """
    if isinstance(handlers, App):
        return handlers
    app = App()
    if isinstance(handlers, Mapping):
        for queue, function in handlers.items():
            app.add(queue, function)
        return app
    if not callable(handlers):
        raise InvalidArgument("handlers must be an App, a mapping queue -> function, or a "
                              f"function, got {type(handlers).__name__}")
    if not queues:
        raise InvalidArgument("a single handler function needs the queues it consumes "
                              "(--queue Q)")
    for queue in queues:
        app.add(queue, handlers)
    return app


def _check_module_name(target: str, module_name: str, attribute: str) -> None:
    """A file path where a module belongs (``app.py:app``, ``../dir/app:app``) fails with
    what to write instead, not with an import error."""
    if "/" not in module_name and "\\" not in module_name and not module_name.endswith(".py"):
        return
    path = module_name.replace("\\", "/")
    stem = path[:-3] if path.endswith(".py") else path
    folder, _, name = stem.rpartition("/")
    if not folder:
        raise InvalidArgument(
            f"target {target!r} names a file; a target names a module: write "
            f"{name}:{attribute} (without .py), run where {name}.py is")
    dotted = stem.strip("/").replace("/", ".")
    package = ("" if folder.startswith((".", "/")) or ".." in folder else
               f", or {dotted}:{attribute} if {folder} is a package on the path")
    raise InvalidArgument(
        f"target {target!r} is a file path; a target names a module: run from {folder} "
        f"as 'hailq worker {name}:{attribute}', or put the folder on the import path: "
        f"PYTHONPATH={folder} hailq worker {name}:{attribute}{package}")


def load_target(target: str) -> App | Handler:
    """Import ``module:attribute`` and return the App or handler function it names."""
    module_name, sep, attribute = target.partition(":")
    if not sep or not module_name or not attribute:
        raise InvalidArgument(f"target must look like module:function or module:app, "
                              f"got {target!r}")
    _check_module_name(target, module_name, attribute)
    # `hailq worker checkers:app` is run where checkers.py lives: like `python -m`, look
    # in the working directory first (the console script's own folder is on the path
    # instead).
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise InvalidArgument(f"cannot import module {module_name!r} of target {target!r}: "
                              f"{exc}") from None
    except Exception as exc:  # the module itself fails: a syntax error, a raise at import
        raise InvalidArgument(f"module {module_name!r} of target {target!r} fails as it is "
                              f"imported: {type(exc).__name__}: {exc}") from None
    obj: Any = module
    for part in attribute.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise InvalidArgument(f"module {module_name!r} has no attribute {attribute!r}") \
                from None
    if isinstance(obj, App) or callable(obj):
        return obj  # type: ignore[no-any-return]
    raise InvalidArgument(f"target {target!r} is neither an App nor a function "
                          f"({type(obj).__name__})")
