"""Whether a worker's handler ran with an inbox (rules 21, 22, 26).

``hailq doctor`` calls redelivered messages a duplicate-effect risk only on
queues whose handlers record nothing: it needs to know, from the stored figures,
whether handlers use ``hailq.inbox`` or settle in ``message.transaction()``. The
worker marks each message it runs (``begin``); the inbox and the ack transaction
``note`` the message id they are given; the worker reads the mark back when the
handler ends (``end``) and counts the run. Keyed by message id, not by thread or
context, so async handlers on the event loop thread are seen too. Outside a
worker (no run begun) ``note`` does nothing.
"""

from __future__ import annotations

_running: dict[str, list[bool]] = {}  # message id -> [an inbox was used during its run]
# No lock: a dict's get, set and pop are each atomic, and a note that lands in a cell
# already popped by ``end`` changes nothing anyone reads. A worker pays this per message.


def begin(message_id: str) -> None:
    """A handler starts on ``message_id`` in this process."""
    _running[message_id] = [False]


def note(message_id: str) -> bool:
    """An inbox (or an ack transaction) was used for ``message_id``; True if a worker's
    run of it in this process counts that when it ends (else the caller may count it)."""
    cell = _running.get(message_id)
    if cell is not None:
        cell[0] = True
        return True
    return False


def end(message_id: str) -> bool:
    """The handler on ``message_id`` ended; True if it used an inbox meanwhile."""
    cell = _running.pop(message_id, None)
    return cell is not None and cell[0]
