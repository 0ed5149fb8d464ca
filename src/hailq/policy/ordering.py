"""The delivery sort key of SPEC rule 16, computed once at send so an index serves it."""

from __future__ import annotations


def sort_key(priority: int, available_at: float, aging: float | None) -> float:
    """Smaller keys are delivered first; ties go by send sequence.

    Strict priority (``aging is None``): ``-priority``.
    With aging ``A`` seconds per level: ``available_at - priority * A``, so a
    message of priority ``p`` goes before one of priority ``p + 1`` that became
    available more than ``A`` seconds later; old low-priority work never starves.
    """
    if aging is None:
        return float(-priority)
    return available_at - priority * aging
