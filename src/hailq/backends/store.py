"""What the parts of the storage core share. ``SqlBackend`` (``sql.py``) is composed of
parts (``MessageCore``, ``SendStore``, ``OperatorStore``, ``CatalogStore``...), each
an object of its own over one ``Shared``: the dialect, the caches every part reads,
and the four parts whose services the others call, by their public names
(``messages.live``, ``catalog.subscriptions``, ``history.record``, ``cancels.remove``).
A part never reaches into another's private state."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hailq import joined
    from hailq.backends.cancels import CancelStore
    from hailq.backends.catalog import CatalogStore
    from hailq.backends.core import Live, MessageCore
    from hailq.backends.dialect import Dialect
    from hailq.backends.history import HistoryStore


class Shared:
    """The state of one ``SqlBackend`` its parts share, and the parts that serve the
    others (set by ``SqlBackend`` once it made them)."""

    messages: MessageCore  # a queue's live settings, its upkeep, freeing keys
    catalog: CatalogStore  # a topic's subscriptions
    history: HistoryStore  # recording and forgetting finished messages
    cancels: CancelStore  # removing cancelled messages

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect
        self.settings: dict[str, tuple[float, Live]] = {}  # each queue's, cached
        self.maintained: dict[str, float] = {}  # when each queue's upkeep last ran
        self.place: joined.Place | None = None  # the caller's own database, for sends


class Part:
    """The base of every part of ``SqlBackend``."""

    def __init__(self, shared: Shared) -> None:
        self.shared = shared
        self.dialect: Dialect = shared.dialect  # never replaced: no lookup through shared
