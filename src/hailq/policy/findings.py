"""What ``hailq doctor`` reads and says (rule 26): the evidence of one queue over a recent
window, and the findings, notes and suggestions made from it. Plain data, no I/O:
``hailq/policy/diagnosis.py`` fills and reads it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from hailq.models import DeadMessage

Kind = Literal["poison", "lease_too_short", "duplicate_effects", "saturated_downstream",
               "pool_too_small"]
KINDS: tuple[Kind, ...] = ("poison", "lease_too_short", "duplicate_effects",
                           "saturated_downstream", "pool_too_small")
SnippetKind = Literal["shell", "python"]
LEASE_EXPIRED = "lease expired"  # the error of an attempt ended by its lease
# What a process pool's supervisor records on the messages a dead child held (runtime/held.py).
CHILD_DIED = "worker process exited with "
ALIVE_FOR = 15.0  # a running worker silent this long has died (observe/figures.py)


@dataclass(frozen=True)
class Thresholds:
    """Where a sign becomes a finding; the defaults are documented in
    docs/operations/doctor.md."""

    poison_attempts: int = 2  # a message failed this many attempts with one error
    poison_group: int = 2  # or this many dead letters share one error
    saturation_capacity: float = 1.5  # handler slots grew at least this much ...
    saturation_throughput: float = 1.25  # ... throughput less than this ...
    saturation_handler: float = 1.5  # ... and handler time at least this much
    saturation_slots: int = 1  # complete slots needed on each side of the growth
    rate_limit_share: float = 0.8  # throughput this near the limit: at the limit


@dataclass(frozen=True)
class WorkerSpan:
    """A worker process of the queue as the registry remembers it."""

    id: str
    started_at: float
    last_seen: float
    state: str
    concurrency: int

    def died(self, now: float) -> bool:
        """Ended without saying so: not stopped, and silent for ``ALIVE_FOR``."""
        return self.state != "stopped" and now - self.last_seen > ALIVE_FOR

    def alive_at(self, t: float, now: float) -> bool:
        """It ran at ``t``: started by then, and not yet stopped or silent for good."""
        end = now if self.state != "stopped" and not self.died(now) else self.last_seen
        return self.started_at <= t <= end


@dataclass(frozen=True)
class SlotPoint:
    """One stored slot: handler runs that ended in it and their handler seconds."""

    start: float
    finished: int
    handler_seconds: float


@dataclass(frozen=True)
class QueueEvidence:
    """Everything ``diagnose`` reads about one queue. The counts and handler times cover
    the window: the ``since`` seconds before ``now``. ``dead`` holds dead letters of any
    age (those older than the window become a note)."""

    queue: str
    now: float
    lease: float
    max_attempts: int
    rate: float | None  # the rate limit in messages per second, None without
    rate_text: str | None
    ready: int
    backlog: int
    in_flight: int
    nacked: int  # failed handler runs (nacks) in the window
    redelivered: int  # deliveries of a message after its first, in the window
    late_acks: int  # acks after their lease ended, in the window
    dead_lettered: int
    handler_p99: float | None  # the largest p99 over priorities, in the window
    handler_runs: int  # measured handler runs in the window
    inbox_runs: int  # of them, runs that used an inbox or an ack transaction
    acked_per_second: float | None  # over the last minute
    dead: Sequence[DeadMessage] = ()
    workers: Sequence[WorkerSpan] = ()
    slots: Sequence[SlotPoint] = ()
    since: float = 900.0
    handler_max: float | None = None  # the largest handler time in the window (or a bound)
    final_nacks: int = 0  # of ``nacked``, last attempts: the message died, not redelivered
    # Deadline order (rule 41): the pool that meets every target (``desired_workers``),
    # or the largest useful one with ``pool_reason``, against the workers running now.
    deadline_order: bool = False
    workers_now: int = 0
    concurrency: int = 1
    desired_workers: int = 0
    pool_reason: str | None = None

    @property
    def start(self) -> float:
        """Where the window begins."""
        return self.now - self.since


@dataclass(frozen=True)
class Snippet:
    """One thing to run: a shell command or lines of Python, said as which."""

    kind: SnippetKind
    code: str

    def record(self) -> dict[str, str]:
        return {"kind": self.kind, "code": self.code}


def shell(code: str) -> Snippet:
    return Snippet("shell", code)


def python(code: str) -> Snippet:
    return Snippet("python", code)


@dataclass(frozen=True)
class Finding:
    """One mistake on one queue inside the window: what it is, the numbers that show
    it, what to do (``suggestion``, in words) and what to run (``snippets``)."""

    queue: str
    kind: Kind
    title: str
    evidence: dict[str, Any]
    suggestion: str
    snippets: list[Snippet] = field(default_factory=list)

    def record(self) -> dict[str, Any]:
        """As JSON (``hailq doctor --json``)."""
        return {"queue": self.queue, "kind": self.kind, "title": self.title,
                "evidence": self.evidence, "suggestion": self.suggestion,
                "snippets": [s.record() for s in self.snippets]}


@dataclass(frozen=True)
class Note:
    """Worth knowing, not a mistake (no exit code 3): ``at_rate_limit``,
    ``earlier_dead_letters``."""

    queue: str
    kind: str
    text: str
    evidence: dict[str, Any]

    def record(self) -> dict[str, Any]:
        """As JSON (``hailq doctor --json``)."""
        return {"queue": self.queue, "kind": self.kind, "text": self.text,
                "evidence": self.evidence}


@dataclass(frozen=True)
class Diagnosis:
    """What ``diagnose`` says of one queue; ``healthy`` when nothing was found."""

    queue: str
    findings: list[Finding]
    notes: list[Note]

    @property
    def healthy(self) -> bool:
        return not self.findings
