"""Stored errors made readable: a traceback split into blocks with hailq's own frames
folded, each distinct error of a message once, and dead letters grouped by error.

Pure (no I/O), shared by ``hailq show``, ``hailq dead --group`` and the dashboard.
An error is any text: a handler's traceback (``runtime.outcome.short_traceback``),
a nack reason, "lease expired". Text that is not a traceback stays one text block.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from hailq.models import AttemptError, DeadMessage

SIGNATURE_LENGTH = 200
NO_ERROR = "(no error text)"

_FRAME = re.compile(r'(?P<indent>[ \t]*)File "(?P<path>[^"]*)", line \d+')
_REPEATED = re.compile(r"[ \t]*\[Previous line repeated \d+ more times?\]")
# hailq's frames as recorded elsewhere (another machine's install, a checkout's src/).
_INSTALLED = re.compile(r"[/\\](?:site-packages|dist-packages|src)[/\\]hailq[/\\]")
_HERE = str(Path(__file__).resolve().parent) + os.sep

Kind = Literal["text", "frames", "hailq"]


@dataclass(frozen=True)
class Block:
    """Consecutive lines of one kind: ``text`` (the header, the exception, chaining
    lines), ``frames`` (the handler's frames and its libraries') or ``hailq`` (hailq's
    own frames, ``frames`` of them, which a reader folds)."""

    kind: Kind
    lines: tuple[str, ...]
    frames: int = 0

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


def is_hailq_frame(path: str) -> bool:
    """Whether a traceback's file path is one of hailq's own modules."""
    return path.startswith(_HERE) or _INSTALLED.search(path) is not None


def blocks(error: str | None) -> list[Block]:
    """``error`` as blocks, in its own order (a traceback reads outermost call first)."""
    found: list[tuple[Kind, list[str], int]] = []  # kind, lines, frames

    def add(kind: Kind, lines: list[str]) -> None:
        if found and found[-1][0] == kind:
            found[-1][1].extend(lines)
            if kind != "text":
                found[-1] = (kind, found[-1][1], found[-1][2] + 1)
        else:
            found.append((kind, list(lines), 0 if kind == "text" else 1))

    lines = (error or "").rstrip().splitlines()
    i = 0
    while i < len(lines):
        match = _FRAME.match(lines[i])
        if match is None:
            if _REPEATED.fullmatch(lines[i]) and found and found[-1][0] != "text":
                found[-1][1].append(lines[i])  # belongs to the frame before it
            else:
                add("text", [lines[i]])
            i += 1
            continue
        depth = len(match.group("indent"))
        frame = [lines[i]]
        i += 1
        # The frame's source line and its ^^^ markers are indented deeper than "File".
        while i < len(lines) and lines[i].strip() and not _FRAME.match(lines[i]) \
                and len(lines[i]) - len(lines[i].lstrip()) > depth:
            frame.append(lines[i])
            i += 1
        add("hailq" if is_hailq_frame(match.group("path")) else "frames", frame)
    return [Block(kind, tuple(text), frames) for kind, text, frames in found]


def fold_label(frames: int) -> str:
    return f"{frames} hailq frame{'' if frames == 1 else 's'}"


def folded_lines(error: str | None) -> list[str]:
    """``error``'s lines with each run of hailq's frames as one "… N hailq frames …"."""
    out: list[str] = []
    for block in blocks(error):
        if block.kind == "hailq":
            indent = block.lines[0][:len(block.lines[0]) - len(block.lines[0].lstrip())]
            out.append(f"{indent}… {fold_label(block.frames)} …")
        else:
            out.extend(block.lines)
    return out


def signature(error: str | None) -> str:
    """What identifies an error, cut to 200 characters: a traceback's exception line (the
    first line after its last frame, so a message of many lines still names its type),
    else the last non-empty line."""
    found = blocks(error)
    if len(found) >= 2 and found[-1].kind == "text" and found[-2].kind != "text":
        first = next((line.strip() for line in found[-1].lines if line.strip()), "")
        if first:
            return first[:SIGNATURE_LENGTH]
    lines = [line.strip() for line in (error or "").splitlines() if line.strip()]
    return (lines[-1] if lines else NO_ERROR)[:SIGNATURE_LENGTH]


@dataclass(frozen=True)
class DistinctError:
    """One error text as a message's attempts recorded it, with the attempts that did."""

    error: str
    attempts: tuple[int, ...]
    first_at: float
    last_at: float

    @property
    def signature(self) -> str:
        return signature(self.error)

    @property
    def attempts_text(self) -> str:
        """``#1``, ``#1, #3`` or ``#1–#4`` (a run of three or more)."""
        runs: list[list[int]] = []
        for n in self.attempts:
            if runs and n == runs[-1][-1] + 1:
                runs[-1].append(n)
            else:
                runs.append([n])
        return ", ".join(f"#{r[0]}–#{r[-1]}" if len(r) > 2 else
                         ", ".join(f"#{n}" for n in r) for r in runs)


def distinct(errors: Iterable[AttemptError]) -> list[DistinctError]:
    """Each distinct error text once, in the order it first happened."""
    seen: dict[str, list[AttemptError]] = {}
    for e in errors:
        seen.setdefault(e.error, []).append(e)
    return [DistinctError(text, tuple(e.attempt for e in same), min(e.at for e in same),
                          max(e.at for e in same)) for text, same in seen.items()]


@dataclass(frozen=True)
class ErrorGroup:
    """Dead letters that died with one error (by ``signature``): how many, when the
    error was first and last recorded on them, and one of them as an example."""

    signature: str
    count: int
    first_seen: float
    last_seen: float
    example_id: str
    example_error: str


def group_dead(letters: Iterable[DeadMessage]) -> list[ErrorGroup]:
    """Dead letters grouped by the signature of their last error, the largest group
    first. Seen times are those of the attempts that ended with that error (a letter
    with no error recorded: its death)."""
    groups: dict[str, list[tuple[DeadMessage, list[float]]]] = {}
    for d in letters:
        sig = signature(d.last_error)
        times = [e.at for e in d.errors if signature(e.error) == sig] or [d.dead_at]
        groups.setdefault(sig, []).append((d, times))
    found = [ErrorGroup(sig, len(members), min(min(t) for _, t in members),
                        max(max(t) for _, t in members), members[0][0].id,
                        members[0][0].last_error or "")
             for sig, members in groups.items()]
    return sorted(found, key=lambda g: (-g.count, -g.last_seen, g.signature))
