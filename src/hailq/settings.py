"""Queue settings: frozen, validated once when declared (SPEC rule 1)."""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property
from typing import Any, Literal

from hailq._time import seconds, text_seconds
from hailq.errors import InvalidArgument
from hailq.policy.deadlines import targets_of

NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")
MIB = 1024 * 1024
MAX_MESSAGE_SIZE_LIMIT = 64 * MIB

OnDead = Literal["continue", "park"]
Order = Literal["priority", "deadline"]


def check_name(name: object, what: str = "queue name") -> str:
    """Return ``name`` if it is a valid queue/topic name, else raise InvalidArgument."""
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise InvalidArgument(
            f"invalid {what} {name!r}: use 1-128 characters from A-Z a-z 0-9 _ . : -, "
            "starting with a letter or digit"
        )
    return name


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff after a failed attempt: ``min(max, base * factor**(n-1))``.

    ``jitter`` is the fraction of the delay that is randomised downwards
    (0 = exact delays, 1 = anywhere between 0 and the full delay).
    """

    base: float = 1.0
    factor: float = 2.0
    max: float = 300.0
    jitter: float = 0.1

    def __post_init__(self) -> None:
        object.__setattr__(self, "base", seconds(self.base, "retry base"))
        object.__setattr__(self, "max", seconds(self.max, "retry max"))
        if self.base > self.max:
            raise InvalidArgument(
                f"retry base ({self.base:g} s) must not be longer than retry max "
                f"({self.max:g} s): the backoff would never reach base")
        if isinstance(self.factor, bool) or not isinstance(self.factor, int | float) \
                or not 1.0 <= float(self.factor) <= 100.0:
            raise InvalidArgument(
                f"retry factor must be a number from 1 to 100, got {self.factor!r}")
        if isinstance(self.jitter, bool) or not isinstance(self.jitter, int | float) \
                or not 0.0 <= float(self.jitter) <= 1.0:
            raise InvalidArgument(
                f"retry jitter must be a fraction from 0 to 1, got {self.jitter!r}")
        object.__setattr__(self, "factor", float(self.factor))
        object.__setattr__(self, "jitter", float(self.jitter))


_SETTING_NAMES = (
    "lease", "max_attempts", "aging", "retry", "dedup_window",
    "max_message_size", "max_in_flight", "on_dead", "rate", "burst", "slo", "order",
    "retain", "retain_bodies",
)
MAX_RETAIN = 366 * 86400.0  # a year and a day

_RATE = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*/\s*(s|sec|second|m|min|minute|h|hour)\s*")
_PERIODS = {"s": 1.0, "sec": 1.0, "second": 1.0, "m": 60.0, "min": 60.0, "minute": 60.0,
            "h": 3600.0, "hour": 3600.0}
MAX_RATE = 1_000_000.0  # messages per second


def rate_per_second(rate: object) -> float:
    """Messages per second of a rate limit such as ``"100/s"``, ``"10/m"`` or ``"5/h"``;
    InvalidArgument for anything else (rule 33)."""
    found = _RATE.fullmatch(rate) if isinstance(rate, str) else None
    if found is None:
        raise InvalidArgument(
            f'rate must look like "100/s", "10/m" or "5/h" (messages per second, minute or '
            f"hour), got {rate!r}")
    per_second = float(found.group(1)) / _PERIODS[found.group(2)]
    if not 0 < per_second <= MAX_RATE:
        raise InvalidArgument(f"rate must be more than 0 and at most {MAX_RATE:g}/s, "
                              f"got {rate!r}")
    return per_second


@dataclass(frozen=True)
class QueueSettings:
    """A queue's settings. Durations are seconds (``timedelta`` is accepted)."""

    lease: float = 30.0
    max_attempts: int = 5
    aging: float | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    dedup_window: float = 3600.0
    max_message_size: int = MIB
    max_in_flight: int | None = None
    on_dead: OnDead = "continue"
    # Rule 33: at most this many messages start per period, over every consumer; None: no
    # limit. ``burst``: how many may start at once after a quiet spell (default one
    # second's worth, at least 1).
    rate: str | None = None
    burst: int | None = None
    # Service levels (rule 25): priority -> the longest a message of it should wait, in
    # seconds, from available to handler start. Priorities not listed have none.
    slo: dict[int, float] | None = None
    # Rule 41: "priority" (rule 16: strict, or aged with ``aging``) or "deadline": the
    # message whose deadline (available_at + its priority's target, from ``slo``) comes
    # first is served first. One or the other with ``aging``.
    order: Order = "priority"
    # Rule 40: keep acked, dead and cancelled messages searchable for this long (history);
    # None keeps nothing. ``retain_bodies=False`` keeps everything but their bodies.
    retain: float | None = None
    retain_bodies: bool = True

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "lease", seconds(self.lease, "lease", allow_zero=False, maximum=12 * 3600))
        _check_int(self.max_attempts, "max_attempts", 1, 1000)
        if self.aging is not None:
            set_(self, "aging", seconds(self.aging, "aging", allow_zero=False, maximum=30 * 86400))
        if isinstance(self.retry, dict):
            set_(self, "retry", RetryPolicy(**_only(self.retry, RetryPolicy.__dataclass_fields__,
                                                    "retry")))
        elif not isinstance(self.retry, RetryPolicy):
            raise InvalidArgument(f"retry must be a RetryPolicy or a dict, got {self.retry!r}")
        set_(self, "dedup_window", seconds(self.dedup_window, "dedup_window", maximum=30 * 86400))
        _check_int(self.max_message_size, "max_message_size", 1, MAX_MESSAGE_SIZE_LIMIT)
        if self.max_in_flight is not None:
            _check_int(self.max_in_flight, "max_in_flight", 1, 1_000_000)
        if self.on_dead not in ("continue", "park"):
            raise InvalidArgument(f'on_dead must be "continue" or "park", got {self.on_dead!r}')
        if self.rate is not None:
            rate_per_second(self.rate)
        if self.burst is not None:
            if self.rate is None:
                raise InvalidArgument("burst needs a rate (e.g. rate=\"100/s\", burst=20)")
            _check_int(self.burst, "burst", 1, 1_000_000)
        set_(self, "slo", check_slo(self.slo))
        if self.order not in ("priority", "deadline"):
            raise InvalidArgument(f'order must be "priority" or "deadline", got {self.order!r}')
        if self.retain is not None:
            set_(self, "retain", text_seconds(self.retain, "retain", allow_zero=False,
                                              maximum=MAX_RETAIN))
        if not isinstance(self.retain_bodies, bool):
            raise InvalidArgument(f"retain_bodies must be True or False, got "
                                  f"{self.retain_bodies!r}")
        if self.order == "deadline":
            if self.aging is not None:
                raise InvalidArgument(
                    'order="deadline" and aging are one or the other: deadline order '
                    "already lets old work of every priority through (set aging=None)")
            if self.slo is None:
                raise InvalidArgument(
                    'order="deadline" needs service-level targets, e.g. slo={9: 10, 0: 3600}')

    @cached_property  # read on every send of the queue
    def targets(self) -> tuple[float, ...] | None:
        """Every priority's target in deadline order (index = priority, unnamed ones
        interpolated, ``policy/deadlines.py``); None in priority order."""
        if self.order != "deadline" or self.slo is None:
            return None
        return targets_of(self.slo)

    @property
    def ordering(self) -> tuple[float | None, tuple[float, ...] | None]:
        """What the sort keys of live messages depend on: a change re-sorts them."""
        return self.aging, self.targets

    @property
    def rate_per_second(self) -> float | None:
        """The rate limit in messages per second; None without one."""
        return None if self.rate is None else rate_per_second(self.rate)

    @property
    def bucket(self) -> float | None:
        """How many messages may start at once: ``burst``, else one second's worth (at
        least 1); None without a rate limit."""
        per_second = self.rate_per_second
        if per_second is None:
            return None
        return float(self.burst if self.burst is not None else max(1, math.ceil(per_second)))

    @classmethod
    def build(cls, base: QueueSettings | None = None, **changes: Any) -> QueueSettings:
        """Return ``base`` (or the defaults) with ``changes`` applied; unknown names fail."""
        _only(changes, _SETTING_NAMES, "queue setting")
        if "rate" in changes and changes["rate"] is None and "burst" not in changes:
            changes = {**changes, "burst": None}  # no limit: no burst either
        converted = {k: _coerce(k, v) for k, v in changes.items()}
        return replace(base, **converted) if base is not None else cls(**converted)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    def overlay(self, overrides: dict[str, Any] | None) -> QueueSettings:
        """These (declared) settings with an operator's overrides laid over them: each
        overridden setting replaces the declared one whole (``retry`` too), the others
        stay as declared. This is what consumers obey (docs/guides/operating.md)."""
        return QueueSettings.build(self, **overrides) if overrides else self

    @classmethod
    def from_json(cls, text: str) -> QueueSettings:
        data = json.loads(text)
        data["retry"] = RetryPolicy(**data.get("retry", {}))
        return cls(**{k: v for k, v in data.items() if k in _SETTING_NAMES})


def check_slo(value: object) -> dict[int, float] | None:
    """``{priority: seconds}`` with priorities 0-9 and targets above 0 (an empty mapping
    is None: no service levels); keys read back from JSON as strings are accepted."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InvalidArgument(f"slo must be a mapping of priority to seconds such as "
                              f"{{9: 10, 0: 600}}, got {value!r}")
    checked: dict[int, float] = {}
    for key, target in value.items():
        priority = int(key) if isinstance(key, str) and key.isdigit() else key
        if isinstance(priority, bool) or not isinstance(priority, int) \
                or not 0 <= priority <= 9:
            raise InvalidArgument(f"slo priorities must be integers from 0 to 9, got {key!r}")
        checked[priority] = seconds(target, f"slo target of priority {priority}",
                                    allow_zero=False, maximum=30 * 86400)
    return dict(sorted(checked.items(), reverse=True)) or None


def _coerce(name: str, value: Any) -> Any:
    if name == "retry" and isinstance(value, dict):
        return RetryPolicy(**_only(value, RetryPolicy.__dataclass_fields__, "retry"))
    if name == "retain" and value is not None:
        return text_seconds(value, name, allow_zero=False, maximum=MAX_RETAIN)
    if name in ("lease", "dedup_window") or (name == "aging" and value is not None):
        return seconds(value, name, allow_zero=name == "dedup_window")
    return value


def _only(given: dict[str, Any], allowed: Any, what: str) -> dict[str, Any]:
    unknown = sorted(set(given) - set(allowed))
    if unknown:
        raise InvalidArgument(
            f"unknown {what} {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}")
    return given


def _check_int(value: object, what: str, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidArgument(f"{what} must be an integer from {low} to {high}, got {value!r}")


def check_overrides(changes: dict[str, Any]) -> dict[str, Any]:
    """Operator overrides as stored (JSON values): ``changes`` checked as declaring them
    would check them (unknown names and bad values raise InvalidArgument)."""
    probe = dict(changes)
    if probe.get("order") == "deadline":  # its targets may be declared, aging cleared:
        probe.setdefault("slo", {0: 1.0})  # checked against the effective settings
        probe["aging"] = None              # when the change is applied
    built = asdict(QueueSettings.build(None, **probe))
    return {name: built[name] for name in changes}


def parse_overrides(text: str | None) -> dict[str, Any]:
    """Stored overrides, ``{}`` for none."""
    found = json.loads(text) if text else {}
    return dict(found) if isinstance(found, dict) else {}
