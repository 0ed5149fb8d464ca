"""``hailq.connect(url)``: one broker on one storage backend."""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

from hailq._time import Clock, Duration, seconds
from hailq.backends.base import (
    AutoscaleListParams,
    DeleteParams,
    MessageIdRef,
    QueueDescribeParams,
    QueueSaveParams,
    ScheduleDeleteParams,
    SchedulePauseParams,
    TopicRef,
    WaitParams,
    WorkerPruneParams,
)
from hailq.backends.registry import lookup
from hailq.checks import check_limit
from hailq.codec import Body
from hailq.errors import (
    InvalidArgument,
    MessageNotFound,
    QueueNotFound,
    ScheduleNotFound,
    TopicNotFound,
)
from hailq.history import HistoryEntry, HistoryQuery
from hailq.hooks import Hook, check_hook
from hailq.ids import check_message_id
from hailq.models import AutoscalerInfo, QueueRecord, ScheduleInfo, WorkerInfo
from hailq.queue import Queue
from hailq.settings import QueueSettings, check_name, parse_overrides
from hailq.topic import Topic
from hailq.url import DEFAULT_URL, split_url

if TYPE_CHECKING:
    from hailq.backends.base import Backend, LevelRow
    from hailq.observe.overview import QueueGlance
    from hailq.observe.recorder import FigureRecorder


class Broker:
    """hailq on one database. Thread-safe; use one per process (it is fork-safe too)."""

    def __init__(self, backend: Backend, *, figures: bool = True,
                 clock: Clock | None = None, hooks: Sequence[Hook] = ()) -> None:
        """``figures``: count every claim, ack and nack of this broker's queues (rules 25,
        36), written about once a second; False counts nothing (``hailq bench`` compares
        the two). ``clock``: the backend's injected clock, read directly for waits.
        ``hooks``: send hooks (``add_hook``)."""
        from hailq.observe.recorder import FigureRecorder

        # Shared with every Queue of this broker, so a hook added later applies to them.
        self.hooks: list[Hook] = []
        for hook in hooks:
            self.add_hook(hook)
        self.backend = backend
        self.url = backend.url_for_display
        self.figures: FigureRecorder | None = (
            FigureRecorder(backend, clock=clock) if figures else None)

    def add_hook(self, hook: Hook) -> Hook:
        """Run ``hook``'s send methods (``around_send``, ``before_send``, ``after_send``)
        around every send and publish of this broker's queues and topics, after the hooks
        added before it; returns it. InvalidArgument unless it is a ``hailq.Hook``. See
        ``hailq.hooks`` for the order and what a failing hook does."""
        self.hooks.append(check_hook(hook))
        return hook

    def migrate(self) -> int:
        """Create or upgrade hailq's schema; return its version. ``connect`` does this too."""
        return self.backend.schema_migrate()

    def queue(self, name: str, **settings: Any) -> Queue:
        """Declare a queue, or update the given settings of an existing one, and return it.

        Unknown settings and bad values raise InvalidArgument before anything is
        written. What code declares is kept apart from an operator's overrides
        (``configure``): declaring never undoes them, and the returned queue's
        ``settings`` are the effective ones, declared overlaid by overrides, as read
        now. Every send, claim, nack and renewal reads the queue's settings where it
        runs, so a change reaches every process within a second (rule 39).
        """
        check_name(name)
        found = self.backend.queue_describe(QueueDescribeParams([name]))
        current = QueueSettings.from_json(found[0].declared) if found else None
        wanted = QueueSettings.build(current, **settings)
        if not found or wanted != current:
            # Messages already queued take the new aging or targets too, or old and new
            # ones would be ordered by different rules (rules 16, 41).
            resort = current is not None and wanted.ordering != current.ordering
            self.backend.queue_save(QueueSaveParams(name, wanted.to_json(), resort))
        overrides = parse_overrides(found[0].overrides) if found else {}
        return Queue(self.backend, name, wanted.overlay(overrides), overrides, self.figures,
                     self.hooks)

    def get_queue(self, name: str) -> Queue:
        """An existing queue with its effective settings; QueueNotFound if never declared
        (or deleted). Writes nothing."""
        check_name(name)
        found = self.backend.queue_describe(QueueDescribeParams([name]))
        if not found:
            raise QueueNotFound(f"no queue named {name!r}; declare it with broker.queue()")
        return _queue(self.backend, found[0], self.figures, self.hooks)

    def queues(self) -> list[Queue]:
        """Every declared queue with its effective settings."""
        return [_queue(self.backend, r, self.figures, self.hooks)
                for r in self.backend.queue_describe(QueueDescribeParams(None))]

    def configure(self, name: str, *, reset: bool = False, **settings: Any) -> Queue:
        """An operator's change of a queue's settings; see ``Queue.configure``."""
        queue = self.get_queue(name)
        queue.configure(reset=reset, **settings)
        return queue

    def delete_queue(self, name: str, force: bool = False) -> int:
        """Delete a queue with its dedup records, counters, operator state and the
        subscriptions it is (so it stops receiving copies); return how many messages
        were deleted with it. Refused with QueueNotEmpty (nothing deleted) while it
        holds messages, live or dead, unless ``force``. A ``Queue`` of it then raises
        QueueNotFound on send, receive and stats; declaring it again starts anew."""
        check_name(name)
        _check_flag(force, "force")
        return self.backend.queue_delete(DeleteParams(name, force))

    def cancel(self, message_id: str, queue: str | None = None) -> str:
        """Cancel one message by id (rule 40, see ``Queue.cancel``); ``queue`` spares the
        lookup of its queue. Returns ``"waiting"`` or ``"running"``, the state it was
        cancelled in. MessageNotFound (nothing written) for an unknown, acked or dead id."""
        check_message_id(message_id)
        if queue is None:
            queue = self.backend.message_locate(MessageIdRef(message_id))
            if queue is None:
                raise MessageNotFound(f"no live message {message_id!r} in any queue (acked, "
                                      "dead, purged or never sent); nothing was cancelled")
        check_name(queue)
        return self.get_queue(queue).cancel(message_id)

    def delete_topic(self, name: str, force: bool = False) -> int:
        """Delete a topic; return how many subscriptions were removed with it. Refused
        with TopicHasSubscriptions (nothing deleted) while it has subscriptions, unless
        ``force``: their queues stay, as ordinary queues, with their messages."""
        check_name(name, "topic name")
        _check_flag(force, "force")
        return self.backend.topic_delete(DeleteParams(name, force))

    def overview(self, limit: int = 10_000) -> list[QueueGlance]:
        """Every queue at a glance, by name, in one snapshot: its figures as
        ``Queue.figures`` gives them, but each count stops past ``limit`` (named in the
        glance's ``capped``), so a million messages cost what a few thousand do. What the
        dashboard's overview shows; a read."""
        from hailq.backends.base import OverviewParams
        from hailq.observe.overview import glances

        limit = check_limit(limit)
        return glances(self.backend.overview_read(OverviewParams(limit)),
                       self.backend.worker_list(), limit)

    def history(self, **filters: Any) -> list[HistoryEntry]:
        """Finished messages of every queue that keeps history (rule 40), newest first.
        Filters as ``HistoryQuery``: ``queue``, ``id``, ``dedup_id``,
        ``header=(name, value)``, ``ordering_key``, ``outcome`` ("acked", "dead",
        "cancelled"), ``since``, ``until`` (epoch seconds or datetimes), ``limit``."""
        return self.backend.history_search(HistoryQuery(**filters))

    def topic(self, name: str) -> Topic:
        """Declare a topic (idempotent) and return it."""
        check_name(name, "topic name")
        self.backend.topic_save(TopicRef(name))
        return Topic(self, name)

    def get_topic(self, name: str) -> Topic:
        """An existing topic; TopicNotFound if it was never declared (writes nothing)."""
        check_name(name, "topic name")
        if name not in self.backend.topic_list():
            raise TopicNotFound(f"no topic named {name!r}; declare it with broker.topic()")
        return Topic(self, name)

    def topics(self) -> list[Topic]:
        """Every declared topic, by name (like ``queues``, the objects themselves)."""
        return [Topic(self, name) for name in self.backend.topic_list()]

    def workers(self) -> list[WorkerInfo]:
        """Workers as they last reported (a read: nothing is written or forgotten here;
        ``maintain`` forgets workers long silent)."""
        return self.backend.worker_list()

    def maintain(self, forget_workers_after: Duration = 86400.0) -> None:
        """The upkeep that consumers do as they claim, for every queue, as an explicit
        step: due messages become ready, ended leases return their message or kill it
        after its last attempt (rule 13), and workers silent for
        ``forget_workers_after`` seconds are forgotten. Reads never do this themselves."""
        after = seconds(forget_workers_after, "forget_workers_after")
        for queue in self.queues():
            queue.maintain()
        self.backend.worker_prune(WorkerPruneParams(self.backend.clock_now() - after))

    def now(self) -> float:
        """The broker's clock (the database's on PostgreSQL), in epoch seconds."""
        return self.backend.clock_now()

    def schema_status(self) -> tuple[int, int]:
        """``(found, latest)``: the schema version in the database (0 for none) and the
        one this hailq migrates to. Writes nothing."""
        return self.backend.schema_version(), self.backend.schema_latest()

    def wait(self, queues: Sequence[str], timeout: Duration) -> None:
        """Block until a message may have become receivable in one of ``queues``, or
        ``timeout`` seconds; may return early (callers receive again and wait again)."""
        self.backend.message_wait(WaitParams(queues, seconds(timeout, "timeout")))

    # -- autoscalers (rule 24) -------------------------------------------------------------

    def autoscalers(self, queue: str | None = None, *,
                    within: float = 3600.0) -> list[AutoscalerInfo]:
        """The last decision of each ``hailq autoscale`` process (of ``queue``, or of every
        queue) that decided in the last ``within`` seconds, by queue: how many workers it
        runs, what the backlog asks, grow/shrink/hold and why, the saturation point it
        measured. A read. Decisions are kept an hour."""
        if queue is not None:
            check_name(queue)
        return self.backend.autoscale_list(AutoscaleListParams(queue, self.now() - within))

    def autoscale_decisions(self, queue: str, limit: int = 10) -> list[AutoscalerInfo]:
        """The last ``limit`` decisions of ``queue``'s autoscalers, newest first (a read)."""
        check_name(queue)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 1000:
            raise InvalidArgument(f"limit must be an integer from 1 to 1000, got {limit!r}")
        return self.backend.autoscale_list(AutoscaleListParams(queue, self.now() - 3600.0,
                                                               limit))

    # -- periodic schedules (rule 35) ----------------------------------------------------

    def schedule(self, cron: str | None = None, *, every: Duration | None = None,
                 queue: str, body: Body, name: str | None = None, timezone: str = "UTC",
                 catch_up: int = 0, headers: dict[str, str] | None = None,
                 priority: int = 0) -> ScheduleInfo:
        """Store a periodic schedule (or update the one of that name) for producers: any
        running scheduler (every worker, or ``hailq scheduler``) sends ``body`` to
        ``queue`` at each slot of ``cron`` in ``timezone``, or every ``every`` seconds,
        once per slot however many run. It stays until ``delete_schedule``. Slots from
        before it existed never fire; after downtime the latest missed slot is sent
        once, with ``catch_up=N`` also up to N missed slots before it. Bad values raise
        InvalidArgument before anything is written. See docs/guides/periodic.md."""
        from hailq.schedule import periodic

        wanted = periodic(cron, every=every, queue=queue, body=body, name=name,
                          timezone=timezone, catch_up=catch_up, headers=headers,
                          priority=priority)
        self.queue(queue)
        self.backend.schedule_save(wanted.save_params("broker", self.now()))
        return self.get_schedule(wanted.name)

    def schedules(self) -> list[ScheduleInfo]:
        """Every stored schedule, by name (a read)."""
        from hailq.schedule import info

        now = self.now()
        return [info(row, now) for row in self.backend.schedule_list()]

    def get_schedule(self, name: str) -> ScheduleInfo:
        """The stored schedule ``name``; ScheduleNotFound if there is none."""
        for found in self.schedules():
            if found.name == name:
                return found
        raise ScheduleNotFound(f"no schedule named {name!r}; 'hailq schedules' lists them")

    def pause_schedule(self, name: str) -> None:
        """Stop sending ``name``'s slots until ``resume_schedule`` (every scheduler)."""
        if not self.backend.schedule_pause(SchedulePauseParams(name, True, self.now())):
            raise ScheduleNotFound(f"no schedule named {name!r}")

    def resume_schedule(self, name: str) -> None:
        """Send ``name``'s slots again, from now on: the slots of its pause are skipped."""
        if not self.backend.schedule_pause(SchedulePauseParams(name, False, self.now())):
            raise ScheduleNotFound(f"no schedule named {name!r}")

    def delete_schedule(self, name: str) -> None:
        """Forget ``name``. A worker whose app still declares it stores it again when it
        starts (as new: slots from before never fire)."""
        if not self.backend.schedule_delete(ScheduleDeleteParams(name)):
            raise ScheduleNotFound(f"no schedule named {name!r}")

    def remove_schedule(self, name: str) -> None:
        """Deprecated: ``delete_schedule`` (this name goes in the next release)."""
        warnings.warn("Broker.remove_schedule is deprecated; use Broker.delete_schedule",
                      DeprecationWarning, stacklevel=2)
        self.delete_schedule(name)

    def close(self) -> None:
        """Close this broker's database connections. Using it again afterwards opens new
        ones, as after a fork: ``close`` frees resources, it does not fence anything off.
        The figures counted in this process are written first."""
        if self.figures is not None:
            self.figures.close()
        self.backend.close()

    def __enter__(self) -> Broker:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Broker {self.url}>"

    def levels(self, queue: str | None = None, *, seconds: float = 3600.0) -> list[LevelRow]:
        """Ready, in-flight, delayed, blocked and dead counts and the sent and acked
        counters of ``queue`` (None: every queue), as recorded every 10 s by the running
        workers and ``hailq serve`` over the last ``seconds`` (at most an hour), by queue
        then time. A read (see hailq/backends/levels.py)."""
        from hailq.backends.base import KEEP, LevelsReadParams

        if queue is not None:
            check_name(queue)
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) \
                or not 0 < seconds <= KEEP:
            raise InvalidArgument(f"seconds must be a number above 0 and at most {KEEP:g}, "
                                  f"got {seconds!r}")
        return self.backend.levels_read(LevelsReadParams(self.now() - seconds, queue))


def _queue(backend: Backend, record: QueueRecord,
           recorder: FigureRecorder | None, hooks: list[Hook]) -> Queue:
    overrides = parse_overrides(record.overrides)
    declared = QueueSettings.from_json(record.declared)
    return Queue(backend, record.name, declared.overlay(overrides), overrides, recorder,
                 hooks)


def _check_flag(value: object, what: str) -> None:
    if not isinstance(value, bool):
        raise InvalidArgument(f"{what} must be True or False, got {value!r}")


def connect(url: str | None = None, *, clock: Clock | None = None,
            migrate: bool = True, figures: bool = True,
            hooks: Sequence[Hook] = ()) -> Broker:
    """Open a broker: ``sqlite:///path.db`` or ``postgresql://user@host:port/db``.

    Without ``url``, ``HAILQ_URL`` is used, else ``sqlite:///hailq.db``.
    SQLite options: ``?synchronous=full|extra|normal|off`` (durability of sends,
    default ``full``), ``busy_timeout=SECONDS`` (default 60), ``poll_interval=SECONDS``.
    PostgreSQL options: ``?schema=NAME`` (default ``hailq``), ``pool_size=N``,
    ``poll_interval=SECONDS``; any other option goes to libpq. ``clock`` replaces the
    SQLite backend's clock (tests; PostgreSQL always uses the database's). The schema
    is created or upgraded unless ``migrate=False``. Bad URLs and options raise
    InvalidArgument before anything is created; ``figures=False`` counts no waits, handler
    times or rates in this process (rule 36). A PostgreSQL URL without the optional
    PostgreSQL support installed (``pip install 'hailq[postgres]'``) raises
    BackendUnavailable. ``hooks`` run around every send and publish (``Broker.add_hook``;
    docs/guides/hooks-and-tracing.md). See docs/reference/settings.md.
    """
    split = split_url(url if url is not None else os.environ.get("HAILQ_URL", DEFAULT_URL))
    kind = lookup(split)
    backend = kind.open(kind.parse(split), clock)
    try:
        broker = Broker(backend, figures=figures, clock=clock, hooks=hooks)
    except BaseException:
        backend.close()
        raise
    if migrate:
        try:
            broker.migrate()
        except BaseException:
            backend.close()
            raise
    return broker
