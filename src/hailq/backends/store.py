"""What each part of the storage core may use: the parts (``SendStore``,
``OperatorStore``, ``CatalogStore``...) are mixins of one ``SqlBackend``, and this base
names, once, the state it holds and the core's helpers they call (defined in
``core.py`` and the parts themselves), so that each part reads and type-checks alone."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hailq import joined
    from hailq.backends.core import Live
    from hailq.backends.dialect import Dialect, Tx
    from hailq.history import HistoryOutcome
    from hailq.models import Subscription


class Store:
    """The base of every part of ``SqlBackend``."""

    dialect: Dialect
    _settings: dict[str, tuple[float, Live]]  # each queue's live settings, cached
    _maintained: dict[str, float]  # when each queue's claim-time upkeep last ran
    _place: joined.Place | None  # the caller's own database, for sends beside it

    if TYPE_CHECKING:
        def _live(self, tx: Tx, queue: str, fresh: bool = False) -> Live: ...
        def _maintain(self, tx: Tx, queue: str) -> bool: ...
        def _release(self, tx: Tx, queue: str, keys: Iterable[str]) -> None: ...
        def _subscriptions(self, tx: Tx, topic: str) -> list[Subscription]: ...
        def _history_forget(self, tx: Tx, queue: str,
                            message_id: str | None = None) -> None: ...
        def history_record(self, tx: Tx, queue: str,
                           messages: Sequence[tuple[str, int | None]],
                           outcome: HistoryOutcome) -> None: ...
