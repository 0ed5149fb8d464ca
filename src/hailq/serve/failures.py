"""Failures on the dashboard: tracebacks as blocks for the templates, each distinct error
of a message once, and dead letters grouped by error (``hailq.tracebacks`` does the
reading; this module shapes it for the pages and the API)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from jinja2 import Environment

from hailq.broker import Broker
from hailq.models import AttemptError
from hailq.tracebacks import (
    DistinctError,
    ErrorGroup,
    blocks,
    distinct,
    fold_label,
    group_dead,
    signature,
)

GROUP_SCAN = 1000  # the groups of a page or an API call count this many dead letters at most


@dataclass
class DeadGroups:
    """Dead letters by error, read from the ``scanned`` oldest that match (``more``: there
    are others, not counted)."""

    groups: list[ErrorGroup] = field(default_factory=list)
    scanned: int = 0
    more: bool = False


def dead_groups(broker: Broker, name: str, error: str | None = None,
                older_than: float | None = None, ordering_key: str | None = None,
                scan: int = GROUP_SCAN) -> DeadGroups:
    """The dead letters of queue ``name`` that match the filters, grouped by error."""
    letters = broker.get_queue(name).dead_letters(
        error_contains=error, older_than=older_than, ordering_key=ordering_key, limit=scan + 1)
    return DeadGroups(group_dead(letters[:scan]), min(len(letters), scan), len(letters) > scan)


def group_json(g: ErrorGroup) -> dict[str, Any]:
    return {"error": g.signature, "count": g.count, "first_seen": g.first_seen,
            "last_seen": g.last_seen, "example_id": g.example_id,
            "example_error": g.example_error}


def distinct_rows(errors: Iterable[Mapping[str, Any] | AttemptError]) -> list[DistinctError]:
    """A page's error rows (``{"attempt", "error", "at"}``) as distinct errors."""
    return distinct(e if isinstance(e, AttemptError) else
                    AttemptError(e["attempt"], e["error"], e["at"]) for e in errors)


def register(env: Environment) -> None:
    """The filters the failure templates use."""
    env.filters.update(tb_blocks=blocks, fold_label=fold_label, signature=signature,
                       distinct_errors=distinct_rows)
