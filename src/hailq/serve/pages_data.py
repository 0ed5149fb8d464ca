"""What the dashboard's pages show, read through the ``Broker`` and shaped for templates
and for the overview's JSON. Blocking calls: the routes run them off the event loop.

Nothing here loads every message: the overview counts up to ``COUNT_LIMIT`` per state
(``Broker.overview``), a queue page peeks at most ``MAX_ROWS`` messages, the dead
letters page lists at most ``MAX_ROWS`` and counts its filter's matches up to
``COUNT_LIMIT``.
"""

from __future__ import annotations

import base64
import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

from hailq.backends.base import SLOT, LevelRow
from hailq.broker import Broker
from hailq.errors import TopicNotFound
from hailq.models import (
    AttemptError,
    AutoscalerInfo,
    DeadMessage,
    PeekedMessage,
    Subscription,
    WorkerInfo,
)
from hailq.observe.figures import ALIVE_FOR, QueueFigures
from hailq.observe.overview import QueueGlance
from hailq.queue import Queue

# The overview's counts stop past this (and read "1,000+"): counting costs per message,
# and a hundred queues of ten thousand each would take most of a second to count in full
# (docs/performance.md). A queue's own page counts its messages in full.
COUNT_LIMIT = 1_000
DEAD_COUNT_LIMIT = 10_000  # a dead letters page counts its filter's matches up to this
BULK_LIMIT = 10_000  # the most one click redrives or deletes (the API's limit field)
MAX_ROWS = 500  # the most messages a page lists
DEFAULT_ROWS = 50
PREVIEW = 160  # characters of a body in a table cell
FULL = 20_000  # characters of a body shown when a row is opened

# The settings a queue page lists, in this order, with how each reads.
SETTING_ROWS = ("lease", "max_attempts", "max_in_flight", "aging", "order", "on_dead", "retry",
                "rate", "burst", "slo", "dedup_window", "max_message_size")


# -- the overview ------------------------------------------------------------------------

def glance_json(g: QueueGlance) -> dict[str, Any]:
    """One queue of the overview, as the page's script reads it every few seconds."""
    s, r = g.figures.stats, g.figures.rates
    return {
        "name": g.name, "paused": s.paused,
        "ready": s.ready, "in_flight": s.in_flight, "delayed": s.scheduled,
        "blocked": s.blocked, "dead": s.dead, "capped": sorted(g.capped),
        "oldest_ready_age": s.oldest_ready_age,
        "sent_1m": r.sent_1m, "acked_1m": r.acked_1m, "dead_lettered_1m": r.dead_lettered_1m,
        "breaches_5m": g.breaches_5m, "workers": g.figures.workers,
        "desired_workers": g.figures.desired_workers,
        "desired_workers_reason": g.figures.desired_workers_reason,  # rule 41
        "overridden": list(g.overridden),
        "sent": s.sent, "dead_lettered": s.dead_lettered,  # counters: exact, never capped
    }


def overview_json(broker: Broker) -> dict[str, Any]:
    """Every queue at a glance, and the totals the charts draw."""
    glances = broker.overview(COUNT_LIMIT)
    queues = [glance_json(g) for g in glances]
    at = glances[0].figures.at if glances else broker.now()
    found = totals(queues)
    found["workers"] = sum(1 for w in broker.workers()
                           if w.state == "running" and at - w.last_seen <= ALIVE_FOR)
    return {"at": at, "limit": COUNT_LIMIT, "queues": queues, "totals": found}


def totals(queues: list[dict[str, Any]]) -> dict[str, Any]:
    """Sums over every queue; a sum that includes a capped count is capped too."""
    out: dict[str, Any] = {"queues": len(queues),
                           "paused": sum(1 for q in queues if q["paused"]),
                           "breaches_5m": sum(q["breaches_5m"] for q in queues)}
    for name in ("ready", "in_flight", "delayed", "dead"):
        out[name] = sum(q[name] for q in queues)
        out[name + "_capped"] = any(name in q["capped"] or
                                    (name == "delayed" and "scheduled" in q["capped"])
                                    for q in queues)
    for name in ("sent_1m", "acked_1m", "dead_lettered_1m"):
        out[name] = sum(q[name] or 0.0 for q in queues)
    out["sent"] = sum(q["sent"] for q in queues)
    return out


# -- a queue ---------------------------------------------------------------------------

@dataclass
class SettingRow:
    name: str
    value: str
    overridden: bool  # an operator's override (hailq configure), not what code declared


@dataclass
class QueuePage:
    name: str
    figures: QueueFigures
    settings: list[SettingRow]
    messages: list[dict[str, Any]]
    limit: int
    more: bool  # there may be more live messages than listed


def queue_page(queue: Queue, limit: int) -> QueuePage:
    figures = queue.figures()
    peeked = queue.peek(limit + 1)
    return QueuePage(queue.name, figures, setting_rows(queue),
                     [message_row(m) for m in peeked[:limit]], limit, len(peeked) > limit)


def setting_rows(queue: Queue) -> list[SettingRow]:
    """Each setting with its effective value, marked where an operator overrode it."""
    effective = asdict(queue.settings)
    return [SettingRow(name, setting_text(effective.get(name), name), name in queue.overrides)
            for name in SETTING_ROWS if name in effective]


def setting_text(value: Any, name: str = "") -> str:
    if value is None:
        return "-"
    if name == "retry" and isinstance(value, dict):
        return (f"{value['base']:g}s x {value['factor']:g}, at most {value['max']:g}s, "
                f"jitter {value['jitter']:g}")
    if isinstance(value, dict):  # slo: priority -> seconds
        return " ".join(f"p{k} within {v:g}s" for k, v in value.items()) or "-"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


# -- messages and dead letters ---------------------------------------------------------

def body_text(body: Any) -> tuple[str, str]:
    """``(kind, text)`` of a body for a page: JSON as compact text, bytes as base64."""
    if isinstance(body, bytes):
        return f"bytes ({len(body):,})", base64.b64encode(body[:FULL]).decode()
    return "json", json.dumps(body, ensure_ascii=False, separators=(",", ":"))[:FULL]


def message_row(m: PeekedMessage | DeadMessage) -> dict[str, Any]:
    kind, text = body_text(m.body)
    row: dict[str, Any] = {
        "id": m.id, "priority": m.priority, "ordering_key": m.ordering_key,
        "attempt": m.attempt, "enqueued_at": m.enqueued_at, "headers": m.headers,
        "body_kind": kind, "body": text, "preview": text[:PREVIEW],
        "cut": len(text) > PREVIEW,
    }
    if isinstance(m, PeekedMessage):
        row.update(state=m.state, available_at=m.available_at)
    else:
        row.update(state="dead", dead_at=m.dead_at, parked=m.parked,
                   errors=[error_row(e) for e in m.errors], last_error=m.last_error)
    return row


def message_details(queue: Queue, message_id: str) -> dict[str, Any] | None:
    """One message looked up by id: its state, attempts, the error of each, its body."""
    found = queue.get_message(message_id)
    if found is None:
        return None
    kind, text = body_text(found.body)
    return {"id": found.id, "state": found.state, "priority": found.priority,
            "ordering_key": found.ordering_key, "attempt": found.attempt,
            "enqueued_at": found.enqueued_at, "available_at": found.available_at,
            "lease_until": found.lease_until, "dead_at": found.dead_at,
            "parked": found.parked, "headers": found.headers, "body_kind": kind,
            "body": text, "preview": text[:PREVIEW], "cut": len(text) > PREVIEW,
            "errors": [error_row(e) for e in found.errors]}


def error_row(e: AttemptError) -> dict[str, Any]:
    return {"attempt": e.attempt, "error": e.error, "at": e.at}


@dataclass
class DeadFilter:
    """The dead letters page's filter, as the form and the API's bulk actions take it."""

    error: str | None = None
    older_than: float | None = None  # seconds dead
    ordering_key: str | None = None

    def api_body(self, limit: int) -> dict[str, Any]:
        """What a bulk button sends: the filter, and as its limit the number the
        confirmation names, so the server acts on no more than that."""
        body: dict[str, Any] = {"limit": max(limit, 1)}
        if self.error is not None:
            body["error"] = self.error
        if self.older_than is not None:
            body["older_than"] = self.older_than
        if self.ordering_key is not None:
            body["ordering_key"] = self.ordering_key
        return body

    @property
    def active(self) -> bool:
        return self.error is not None or self.older_than is not None \
            or self.ordering_key is not None


@dataclass
class DeadPage:
    name: str
    filter: DeadFilter
    count: int  # matches, counted up to DEAD_COUNT_LIMIT
    capped: bool
    rows: list[dict[str, Any]] = field(default_factory=list)
    limit: int = DEFAULT_ROWS
    now: float = 0.0  # the broker's clock as the page was read

    @property
    def bulk(self) -> int:
        """How many one bulk click touches: the matches, up to BULK_LIMIT."""
        return min(self.count, BULK_LIMIT)


def dead_page(broker: Broker, name: str, chosen: DeadFilter, limit: int) -> DeadPage:
    queue = broker.get_queue(name)
    count = queue.count_dead_letters(error_contains=chosen.error, older_than=chosen.older_than,
                                     ordering_key=chosen.ordering_key, limit=DEAD_COUNT_LIMIT)
    rows = queue.dead_letters(error_contains=chosen.error, older_than=chosen.older_than,
                              ordering_key=chosen.ordering_key, limit=limit)
    return DeadPage(queue.name, chosen, min(count, DEAD_COUNT_LIMIT), count > DEAD_COUNT_LIMIT,
                    [message_row(m) for m in rows], limit, broker.now())


# -- topics, workers, autoscalers --------------------------------------------------------

def listed_topics(broker: Broker) -> list[tuple[str, list[Subscription]]]:
    """Each topic with its subscriptions. A topic deleted while the list is read is left
    out, not an error: a look at the topics never fails because an operator acts."""
    out = []
    for name in (t.name for t in broker.topics()):
        try:
            out.append((name, broker.get_topic(name).subscriptions()))
        except TopicNotFound:
            continue
    return out


def topics(broker: Broker) -> list[dict[str, Any]]:
    """Each topic with its subscriptions, each with its queue's backlog (ready, in flight,
    dead; capped as the overview caps them, "1,000+")."""
    listed = listed_topics(broker)
    backlog = {g.name: g for g in broker.overview(COUNT_LIMIT)} if listed else {}
    out = []
    for name, subs in listed:
        rows = []
        for s in subs:
            glance = backlog.get(s.queue)
            counts = None if glance is None else {
                k: (f"{glance.limit:,}+" if k in glance.capped else
                    f"{getattr(glance.figures.stats, k):,}")
                for k in ("ready", "in_flight", "dead")}
            rows.append({"queue": s.queue, "backlog": counts,
                         "filter": None if not s.filter else json.dumps(
                             s.filter, ensure_ascii=False, sort_keys=True)})
        out.append({"name": name, "subscriptions": rows})
    return out


def workers(broker: Broker) -> tuple[float, list[dict[str, Any]]]:
    now = broker.now()
    found: list[WorkerInfo] = sorted(broker.workers(), key=lambda w: (w.state, -w.last_seen))
    return now, [{**asdict(w), "silent_for": max(now - w.last_seen, 0.0),
                  "alive": w.state == "running" and now - w.last_seen <= ALIVE_FOR}
                 for w in found]


def autoscalers(broker: Broker) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Each ``hailq autoscale`` process's last decision (rule 24), and the last decisions
    of their queues, newest first; each with its age on the broker's clock."""
    now = broker.now()
    latest = broker.autoscalers()
    recent = sorted((d for q in sorted({a.queue for a in latest})
                     for d in broker.autoscale_decisions(q, 20)),
                    key=lambda d: -d.at)[:50]

    def view(d: AutoscalerInfo) -> dict[str, Any]:
        return {**asdict(d), "ago": max(now - d.at, 0.0)}

    return [view(d) for d in latest], [view(d) for d in recent]


# -- levels over time (the charts' history) --------------------------------------------

SERIES = ("ready", "in_flight", "delayed", "dead")


def levels_json(broker: Broker, queue: str | None, seconds: float) -> dict[str, Any]:
    """What the charts load when a page opens: the levels recorded over the last
    ``seconds`` (``Broker.levels``) as columns. ``totals`` sums every queue per slot;
    with ``queue`` its series are in ``queues``; without, ``queues`` holds each queue's
    ``at`` and ``ready`` only (the overview's sparklines). Rates per second are the
    differences of the sent and acked counters between a queue's slots (None at a
    queue's first slot, and for acked where a count was capped)."""
    now = broker.now()
    if queue is not None:
        broker.get_queue(queue)  # QueueNotFound: a typo answers 404, as elsewhere
    rows = broker.levels(queue, seconds=seconds)
    per_queue: dict[str, dict[str, list[Any]]] = {}
    slots: dict[int, dict[str, Any]] = {}
    last: dict[str, LevelRow] = {}
    for row in rows:  # by queue, then time
        series = per_queue.setdefault(row.queue, _series())
        before = last.get(row.queue)
        sent, acked = _rates(before, row)
        last[row.queue] = row
        for name in SERIES:
            series[name].append(getattr(row, name))
        series["at"].append(row.at)
        series["sent_per_second"].append(sent)
        series["acked_per_second"].append(acked)
        slot = slots.setdefault(math.floor(row.at / SLOT), {
            "at": row.at, **{name: 0 for name in SERIES},
            "sent_per_second": None, "acked_per_second": None})
        slot["at"] = max(slot["at"], row.at)
        for name in SERIES:
            slot[name] += getattr(row, name)
        for name, value in (("sent_per_second", sent), ("acked_per_second", acked)):
            if value is not None:
                slot[name] = (slot[name] or 0.0) + value
    totals = _series()
    for key in sorted(slots):
        for name, value in slots[key].items():
            totals[name].append(value)
    queues = [{"name": name, **(series if queue is not None else
                                {"at": series["at"], "ready": series["ready"]})}
              for name, series in per_queue.items()]
    return {"now": now, "seconds": seconds, "slot_seconds": SLOT, "totals": totals,
            "queues": queues}


def _series() -> dict[str, list[Any]]:
    return {name: [] for name in ("at", *SERIES, "sent_per_second", "acked_per_second")}


def _rates(before: LevelRow | None, row: LevelRow) -> tuple[float | None, float | None]:
    """Sent and acked per second between two slots of a queue; a counter that went back
    (the queue deleted and declared again) gives no rate."""
    if before is None or row.at <= before.at:
        return None, None
    span = row.at - before.at
    sent = (row.sent - before.sent) / span if row.sent >= before.sent else None
    acked = None
    if row.acked is not None and before.acked is not None and row.acked >= before.acked:
        acked = (row.acked - before.acked) / span
    return sent, acked


# -- schedules ---------------------------------------------------------------------------

def schedules(broker: Broker) -> tuple[float, list[dict[str, Any]]]:
    """Every periodic schedule (rule 35) with its timing as an operator reads it and its
    state: paused, waiting for a scheduler (an app's schedule no running worker
    declares), or active."""
    now = broker.now()
    out = []
    for s in broker.schedules():
        timing = (f"cron {s.cron} ({s.timezone})" if s.cron is not None
                  else f"every {_seconds(s.every or 0.0)}")
        state = "paused" if s.paused else "active" if s.declared else "undeclared"
        out.append({**asdict(s), "timing": timing, "state": state})
    return now, out


def _seconds(value: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if value >= size and value % size == 0:
            return f"{value / size:g}{unit}"
    return f"{value:g}s"
