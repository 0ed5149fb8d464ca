"""The delivery sort key of SPEC rules 16 and 41, computed once at send so an index
serves it."""

from __future__ import annotations


def sort_key(priority: int, available_at: float, aging: float | None,
             target: float | None = None) -> float:
    """Smaller keys are delivered first; ties go by send sequence.

    Deadline order (rule 41, ``target`` is the priority's service-level target):
    ``available_at + target``, the message's deadline.
    Strict priority (``aging is None``): ``-priority``.
    With aging ``A`` seconds per level: ``available_at - priority * A``, so a
    message of priority ``p`` goes before one of priority ``p + 1`` that became
    available more than ``A`` seconds later; old low-priority work never starves.
    PostgreSQL's ``sort_key`` function (migration 8) says the same.
    """
    if target is not None:
        return available_at + target
    if aging is None:
        return float(-priority)
    return available_at - priority * aging
