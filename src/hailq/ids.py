"""Time-ordered message ids and lease receipts."""

from __future__ import annotations

import os
import random
import re
import threading
import time

from hailq.errors import InvalidArgument

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # Crockford base32: sorts like the number
_PAIRS = [a + b for a in _ALPHABET for b in _ALPHABET]  # every 10-bit value as 2 characters
_lock = threading.Lock()
_last = (0, 0)
# Seeded from os.urandom, and again in every forked child (two processes never share a
# sequence, whatever the user's code does to the ``random`` module). Not os.urandom per
# id: it lets go of the GIL, and a sending thread (or an event loop building a send)
# then waited for another thread to hand the GIL back, up to 5 ms, under this lock.
_random = random.Random(os.urandom(32))
os.register_at_fork(after_in_child=lambda: _random.seed(os.urandom(32)))

ID_PATTERN = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}")
# id . lease token [. row position] [. p priority t claim time]: the position lets a
# backend find the row without an index on ids; the priority and the claim time (broker
# clock, milliseconds) let whoever acks, in any process, count the handler time (rule 36).
# Receipts made before either was added still parse (None for what they lack).
RECEIPT_PATTERN = re.compile(r"([0-9A-HJKMNP-TV-Z]{26})\.([0-9a-f]{16})(?:\.([1-9][0-9]{0,17}))?"
                             r"(?:\.p([0-9])t([0-9]{1,16}))?")


def new_message_id() -> str:
    """A 26-character id: 50 bits of milliseconds, then 80 bits that only grow within a
    process. Ids sort by creation time; two ids made in the same millisecond by one
    process still sort in creation order.
    """
    global _last
    with _lock:
        ms = time.time_ns() // 1_000_000
        last_ms, last_rand = _last
        if ms <= last_ms:
            ms, rand = last_ms, last_rand + 1
        else:
            rand = _random.getrandbits(79)  # room to count upwards
        _last = (ms, rand)
    # The 130 bits as 13 pairs of characters, ten bits each, written out: a loop or a
    # join of a generator cost half as much again, and every send makes an id.
    v, p = ms << 80 | rand & _RAND_MASK, _PAIRS
    return (p[v >> 120 & 1023] + p[v >> 110 & 1023] + p[v >> 100 & 1023]
            + p[v >> 90 & 1023] + p[v >> 80 & 1023] + p[v >> 70 & 1023] + p[v >> 60 & 1023]
            + p[v >> 50 & 1023] + p[v >> 40 & 1023] + p[v >> 30 & 1023] + p[v >> 20 & 1023]
            + p[v >> 10 & 1023] + p[v & 1023])


_RAND_MASK = (1 << 80) - 1


def check_message_id(value: object) -> str:
    if not isinstance(value, str) or not ID_PATTERN.fullmatch(value):
        raise InvalidArgument(f"not a hailq message id: {value!r} (26 characters of base32)")
    return value


def make_receipt(message_id: str, token: str, seq: int | None, priority: int | None = None,
                 claimed_at: float | None = None) -> str:
    """``id.token.seq.pPtMS``; what is not known is left out (``id.token`` at least)."""
    text = f"{message_id}.{token}" if seq is None else f"{message_id}.{token}.{seq}"
    if priority is not None and claimed_at is not None and claimed_at >= 0:
        text += f".p{priority}t{round(claimed_at * 1000)}"
    return text


def parse_receipt(receipt: object) -> tuple[str, str, int | None]:
    """Split a receipt into ``(message_id, lease_token, row position or None)``; reject
    forged shapes."""
    match = RECEIPT_PATTERN.fullmatch(receipt) if isinstance(receipt, str) else None
    if match is None:
        raise InvalidArgument(f"not a hailq receipt: {receipt!r}")
    seq = match.group(3)
    return match.group(1), match.group(2), None if seq is None else int(seq)


def receipt_claim(receipt: str) -> tuple[int, float] | None:
    """The priority and claim time (broker clock, seconds) a receipt carries, None if it
    carries none (made before they were added) or is no receipt."""
    match = RECEIPT_PATTERN.fullmatch(receipt)
    if match is None or match.group(4) is None:
        return None
    return int(match.group(4)), int(match.group(5)) / 1000.0
