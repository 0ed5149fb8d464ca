"""hailq: durable message queues on embedded SQLite or PostgreSQL.

>>> import hailq
>>> broker = hailq.connect("sqlite:///claims.db")
>>> claims = broker.queue("claims", lease=300, max_attempts=5)
>>> claims.send({"claim": 8311})
"""

from typing import TYPE_CHECKING, Any

from hailq.broker import Broker, connect
from hailq.checks import Envelope
from hailq.errors import (
    BackendUnavailable,
    DeadLetter,
    HailqError,
    InvalidArgument,
    LeaseLost,
    MessageCancelled,
    MessageNotFound,
    MessageTooLarge,
    NotFound,
    OutcomeUnknown,
    QueueNotEmpty,
    QueueNotFound,
    Retry,
    ScheduleNotFound,
    SchemaError,
    StorageError,
    SubscriptionNotFound,
    TopicHasSubscriptions,
    TopicNotFound,
)
from hailq.hooks import Hook
from hailq.inbox import Inbox, inbox
from hailq.message import Message
from hailq.models import (
    AttemptError,
    AutoscalerInfo,
    DeadMessage,
    MessageDetails,
    PeekedMessage,
    QueueStats,
    RunningMessage,
    ScheduleInfo,
    Subscription,
    WorkerInfo,
)
from hailq.queue import Queue
from hailq.settings import QueueSettings, RetryPolicy
from hailq.topic import Topic

if TYPE_CHECKING:
    from hailq.runtime import App, Worker
    from hailq.runtime.timelimit import HandlerCancelled, HandlerInterrupted, TimeLimitExceeded

__all__ = [
    "App",
    "AttemptError",
    "AutoscalerInfo",
    "BackendUnavailable",
    "Broker",
    "DeadLetter",
    "DeadMessage",
    "Envelope",
    "HailqError",
    "HandlerCancelled",
    "HandlerInterrupted",
    "Hook",
    "Inbox",
    "InvalidArgument",
    "LeaseLost",
    "Message",
    "MessageCancelled",
    "MessageDetails",
    "MessageNotFound",
    "MessageTooLarge",
    "NotFound",
    "OutcomeUnknown",
    "PeekedMessage",
    "Queue",
    "QueueNotEmpty",
    "QueueNotFound",
    "QueueSettings",
    "QueueStats",
    "Retry",
    "RetryPolicy",
    "RunningMessage",
    "ScheduleInfo",
    "ScheduleNotFound",
    "SchemaError",
    "StorageError",
    "Subscription",
    "SubscriptionNotFound",
    "TimeLimitExceeded",
    "Topic",
    "TopicHasSubscriptions",
    "TopicNotFound",
    "Worker",
    "WorkerInfo",
    "connect",
    "inbox",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """``App``, ``Worker`` and the exceptions raised into handlers (``TimeLimitExceeded``,
    ``HandlerCancelled``, their base ``HandlerInterrupted``) load the worker runtime on
    first use, not with ``import hailq``: a producer never pays for it."""
    if name in ("App", "Worker"):
        import hailq.runtime

        return getattr(hailq.runtime, name)
    if name in ("TimeLimitExceeded", "HandlerCancelled", "HandlerInterrupted"):
        import hailq.runtime.timelimit

        return getattr(hailq.runtime.timelimit, name)
    raise AttributeError(f"module 'hailq' has no attribute {name!r}")
