"""``SqlBackend``: the ``Backend`` seam over a SQL dialect, composed of its parts.

Each part is an object of its own over the backend's ``Shared`` state (``store.py``):
``MessageCore`` (claims, acks, nacks, a queue's live settings and upkeep), ``SendStore``,
``OperatorStore``, ``CancelStore``, ``CatalogStore``, ``ScheduleStore``,
``FiguresStore``, ``OverviewStore``, ``AutoscaleStore``, ``LevelsStore``,
``HistoryStore`` and ``UpkeepStore``. This class makes them and answers each method of
the seam with the part that owns it; it holds no storage logic of its own.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

from hailq import joined
from hailq.backends.autoscale import AutoscaleStore
from hailq.backends.base import (
    AckParams,
    AckTransactionParams,
    AutoscaleListParams,
    CancelledParams,
    CancelOutcome,
    ClaimParams,
    ClaimResult,
    DeadCountParams,
    DeadListParams,
    DeleteParams,
    ExtendParams,
    FigureRows,
    FiguresReadParams,
    FiguresRecordParams,
    FiguresWindowParams,
    LevelRow,
    LevelsReadParams,
    LevelsRecordParams,
    MessageIdRef,
    MessageRef,
    NackParams,
    OverviewParams,
    PeekParams,
    PruneParams,
    PublishParams,
    PurgeParams,
    QueueConfigureParams,
    QueueDescribeParams,
    QueueGlanceRows,
    QueuePauseParams,
    QueueRef,
    QueueSaveParams,
    RateSlot,
    RedriveParams,
    ScheduleDeclareParams,
    ScheduleDeleteParams,
    ScheduleFireParams,
    SchedulePauseParams,
    ScheduleRow,
    ScheduleSaveParams,
    SendParams,
    SubscriptionDeleteParams,
    TopicRef,
    Turn,
    WaitParams,
    WorkerPruneParams,
)
from hailq.backends.base_parts import (
    DeadlinePoolsParams,
    HistoryPruneParams,
    HistorySettleParams,
    MaintenanceClaimParams,
)
from hailq.backends.cancels import CancelStore
from hailq.backends.catalog import CatalogStore
from hailq.backends.core import MessageCore
from hailq.backends.dialect import Dialect
from hailq.backends.figures import FiguresStore
from hailq.backends.history import HistoryStore
from hailq.backends.levels import LevelsStore
from hailq.backends.operators import OperatorStore
from hailq.backends.overview import OverviewStore
from hailq.backends.schedules import ScheduleStore
from hailq.backends.sends import SendStore
from hailq.backends.store import Shared
from hailq.backends.upkeep import UpkeepStore
from hailq.history import HistoryEntry, HistoryQuery
from hailq.models import (
    AutoscalerInfo,
    DeadMessage,
    MessageDetails,
    PeekedMessage,
    QueueRecord,
    QueueStats,
    Subscription,
    WorkerInfo,
)


class SqlBackend:
    """The ``Backend`` seam over a SQL dialect: its parts, each method answered by one."""

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect
        self.url_for_display = dialect.url_for_display
        self.shared = shared = Shared(dialect)
        self.messages = shared.messages = MessageCore(shared)
        self.sends = SendStore(shared)
        self.operators = OperatorStore(shared)
        self.cancels = shared.cancels = CancelStore(shared)
        self.catalog = shared.catalog = CatalogStore(shared)
        self.schedules = ScheduleStore(shared)
        self.figures = FiguresStore(shared)
        self.overview = OverviewStore(shared)
        self.autoscale = AutoscaleStore(shared)
        self.levels = LevelsStore(shared)
        self.history = shared.history = HistoryStore(shared)
        self.upkeep = UpkeepStore(shared)

    # -- schema and clock ----------------------------------------------------------------

    def schema_migrate(self) -> int:
        return self.dialect.schema_migrate()

    def schema_version(self) -> int:
        return self.dialect.schema_version()

    def schema_latest(self) -> int:
        return self.dialect.schema_latest()

    def clock_now(self) -> float:
        return self.dialect.clock_now()

    def close(self) -> None:
        self.dialect.close()

    # -- messages: claims, acks, nacks, extensions, stats (core.py) ------------------

    def queue_maintain(self, params: QueueRef) -> None:
        return self.messages.queue_maintain(params)

    def queue_stats(self, params: QueueRef) -> QueueStats:
        return self.messages.queue_stats(params)

    def message_claim(self, params: ClaimParams) -> ClaimResult:
        return self.messages.message_claim(params)

    def message_wait(self, params: WaitParams) -> None:
        return self.messages.message_wait(params)

    def message_ack(self, params: AckParams) -> list[bool | None]:
        return self.messages.message_ack(params)

    def message_ack_transaction(self, params: AckTransactionParams) -> AbstractContextManager[Any]:
        return self.messages.message_ack_transaction(params)

    def message_nack(self, params: NackParams) -> bool:
        return self.messages.message_nack(params)

    def message_extend(self, params: ExtendParams) -> list[float | None]:
        return self.messages.message_extend(params)

    # -- sends (sends.py) ------------------------------------------------------------

    def message_send(self, params: SendParams) -> list[str]:
        return self.sends.message_send(params)

    def topic_publish(self, params: PublishParams) -> list[str]:
        return self.sends.topic_publish(params)

    def caller_place(self) -> joined.Place:
        return self.sends.caller_place()

    # -- operators' calls on queues (operators.py) -----------------------------------

    def queue_describe(self, params: QueueDescribeParams) -> list[QueueRecord]:
        return self.operators.queue_describe(params)

    def queue_configure(self, params: QueueConfigureParams) -> QueueRecord:
        return self.operators.queue_configure(params)

    def queue_pause(self, params: QueuePauseParams) -> None:
        return self.operators.queue_pause(params)

    def queue_delete(self, params: DeleteParams) -> int:
        return self.operators.queue_delete(params)

    def message_get(self, params: MessageRef) -> MessageDetails | None:
        return self.operators.message_get(params)

    def message_delete(self, params: MessageRef) -> bool:
        return self.operators.message_delete(params)

    def topic_delete(self, params: DeleteParams) -> int:
        return self.operators.topic_delete(params)

    def subscription_delete(self, params: SubscriptionDeleteParams) -> bool:
        return self.operators.subscription_delete(params)

    def message_peek(self, params: PeekParams) -> list[PeekedMessage]:
        return self.operators.message_peek(params)

    def dead_list(self, params: DeadListParams) -> list[DeadMessage]:
        return self.operators.dead_list(params)

    def dead_redrive(self, params: RedriveParams) -> int:
        return self.operators.dead_redrive(params)

    def message_purge(self, params: PurgeParams) -> int:
        return self.operators.message_purge(params)

    # -- cancels (cancels.py) --------------------------------------------------------

    def message_cancel(self, params: MessageRef) -> CancelOutcome:
        return self.cancels.message_cancel(params)

    def message_locate(self, params: MessageIdRef) -> str | None:
        return self.cancels.message_locate(params)

    def message_cancelled(self, params: CancelledParams) -> list[str]:
        return self.cancels.message_cancelled(params)

    def message_cancel_settle(self, params: CancelledParams) -> list[str]:
        return self.cancels.message_cancel_settle(params)

    # -- queues, topics and workers as stored (catalog.py) ---------------------------

    def queue_save(self, params: QueueSaveParams) -> None:
        return self.catalog.queue_save(params)

    def queue_get(self, params: QueueRef) -> str | None:
        return self.catalog.queue_get(params)

    def queue_list(self) -> list[tuple[str, str]]:
        return self.catalog.queue_list()

    def topic_save(self, params: TopicRef) -> None:
        return self.catalog.topic_save(params)

    def topic_list(self) -> list[str]:
        return self.catalog.topic_list()

    def subscription_save(self, subscription: Subscription) -> None:
        return self.catalog.subscription_save(subscription)

    def subscription_list(self, params: TopicRef) -> list[Subscription]:
        return self.catalog.subscription_list(params)

    def worker_save(self, worker: WorkerInfo) -> None:
        return self.catalog.worker_save(worker)

    def worker_list(self) -> list[WorkerInfo]:
        return self.catalog.worker_list()

    def worker_prune(self, params: WorkerPruneParams) -> int:
        return self.catalog.worker_prune(params)

    # -- periodic schedules (schedules.py) -------------------------------------------

    def schedule_save(self, params: ScheduleSaveParams) -> None:
        return self.schedules.schedule_save(params)

    def schedule_declare(self, params: ScheduleDeclareParams) -> None:
        return self.schedules.schedule_declare(params)

    def schedule_list(self) -> list[ScheduleRow]:
        return self.schedules.schedule_list()

    def schedule_fire(self, params: ScheduleFireParams) -> bool:
        return self.schedules.schedule_fire(params)

    def schedule_pause(self, params: SchedulePauseParams) -> bool:
        return self.schedules.schedule_pause(params)

    def schedule_delete(self, params: ScheduleDeleteParams) -> bool:
        return self.schedules.schedule_delete(params)

    # -- figures (figures.py) --------------------------------------------------------

    def figures_record(self, params: FiguresRecordParams) -> None:
        return self.figures.figures_record(params)

    def figures_read(self, params: FiguresReadParams) -> FigureRows:
        return self.figures.figures_read(params)

    def figures_window(self, params: FiguresWindowParams) -> list[RateSlot]:
        return self.figures.figures_window(params)

    # -- the overview (overview.py) --------------------------------------------------

    def overview_read(self, params: OverviewParams) -> list[QueueGlanceRows]:
        return self.overview.overview_read(params)

    def dead_count(self, params: DeadCountParams) -> int:
        return self.overview.dead_count(params)

    # -- autoscalers (autoscale.py) --------------------------------------------------

    def autoscale_record(self, info: AutoscalerInfo) -> None:
        return self.autoscale.autoscale_record(info)

    def autoscale_list(self, params: AutoscaleListParams) -> list[AutoscalerInfo]:
        return self.autoscale.autoscale_list(params)

    # -- queue levels over time (levels.py) ------------------------------------------

    def levels_record(self, params: LevelsRecordParams) -> bool:
        return self.levels.levels_record(params)

    def levels_read(self, params: LevelsReadParams) -> list[LevelRow]:
        return self.levels.levels_read(params)

    # -- history (history.py) --------------------------------------------------------

    def history_settle(self, params: HistorySettleParams) -> int:
        return self.history.history_settle(params)

    def history_prune(self, params: HistoryPruneParams) -> int:
        return self.history.history_prune(params)

    def history_search(self, query: HistoryQuery) -> list[HistoryEntry]:
        return self.history.history_search(query)

    # -- maintenance duties (upkeep.py) ----------------------------------------------

    def maintenance_claim(self, params: MaintenanceClaimParams) -> bool:
        return self.upkeep.maintenance_claim(params)

    def maintenance_prune(self, params: PruneParams) -> int:
        return self.upkeep.maintenance_prune(params)

    def maintenance_list(self) -> list[Turn]:
        return self.upkeep.maintenance_list()

    def deadline_pools_kept(self) -> bool:
        return self.upkeep.deadline_pools_kept()

    def deadline_pools_save(self, params: DeadlinePoolsParams) -> None:
        return self.upkeep.deadline_pools_save(params)
