"""hailq.tracebacks: stored errors split into blocks, hailq's frames folded, grouping."""

from __future__ import annotations

from typing import Any

from hailq.models import AttemptError, DeadMessage
from hailq.runtime.executor import LoopThread, call_handler
from hailq.runtime.outcome import short_traceback
from hailq.tracebacks import (
    blocks,
    distinct,
    folded_lines,
    group_dead,
    is_hailq_frame,
    signature,
)


def _charge(amount: int) -> None:
    raise ValueError(f"card declined for {amount}\nsecond line of the message")


def _handler(message: Any) -> None:
    _charge(message)


def _recorded(handler: Any = _handler) -> str:
    """The error text a worker stores for a handler that raised, through hailq's frames."""
    loop = LoopThread()
    try:
        call_handler(handler, 42, loop)
    except Exception as exc:
        return short_traceback(exc, frames=50)
    finally:
        loop.close()
    raise AssertionError("the handler did not raise")


def test_a_handlers_traceback_folds_hailqs_frames_and_keeps_the_handlers() -> None:
    text = _recorded()
    found = blocks(text)
    # The test's own call comes first here; in a worker that is hailq's frame too.
    assert [b.kind for b in found] == ["text", "frames", "hailq", "frames", "text"]
    header, caller, own, handler, exception = found
    assert "in _recorded" in caller.text
    assert header.lines == ("Traceback (most recent call last):",)
    assert own.frames == 1 and "executor.py" in own.text and "call_handler" in own.text
    assert handler.frames == 2 and "in _handler" in handler.text and "in _charge" in handler.text
    assert "raise ValueError" in handler.text  # the source line stays with its frame
    assert exception.lines == ("ValueError: card declined for 42",
                               "second line of the message")
    assert "\n".join(b.text for b in found) == text  # nothing lost, nothing reordered


def test_folded_lines_put_one_line_for_each_run_of_hailq_frames() -> None:
    lines = folded_lines(_recorded())
    assert lines[3] == "  … 1 hailq frame …"
    assert not any("executor.py" in line for line in lines)
    assert any("in _charge" in line for line in lines)
    assert lines[-1] == "second line of the message"


async def _async_handler(message: Any) -> None:
    _charge(message)


def test_an_async_handlers_traceback_folds_the_event_loops_hailq_frames() -> None:
    found = blocks(_recorded(_async_handler))
    own = [b for b in found if b.kind == "hailq"]
    assert own and sum(b.frames for b in own) >= 2  # call_handler, LoopThread.run, _wrap
    assert any("in _async_handler" in b.text for b in found if b.kind == "frames")
    assert signature("\n".join(b.text for b in found)) == "ValueError: card declined for 42"


def test_chained_exceptions_and_repeated_lines_stay_in_their_blocks() -> None:
    text = "\n".join([
        "Traceback (most recent call last):",
        '  File "/app/jobs.py", line 3, in inner',
        "    return inner()",
        "  [Previous line repeated 996 more times]",
        "RecursionError: maximum recursion depth exceeded",
        "",
        "The above exception was the direct cause of the following exception:",
        "",
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3/site-packages/hailq/runtime/executor.py", line 75, in call',
        "    result = handler(message)",
        "             ^^^^^^^^^^^^^^^^",
        '  File "/opt/venv/lib/python3.11/site-packages/hailq/runtime/worker.py", line 9, in x',
        '  File "/app/jobs.py", line 9, in handle',
        "    raise KeyError(key) from exc",
        "KeyError: 'order-7'",
    ])
    found = blocks(text)
    assert [b.kind for b in found] == ["text", "frames", "text", "hailq", "frames", "text"]
    assert "[Previous line repeated" in found[1].text and found[1].frames == 1
    assert found[3].frames == 2 and "^^^^" in found[3].text
    assert signature(text) == "KeyError: 'order-7'"
    assert "… 2 hailq frames …" in "\n".join(folded_lines(text))


def test_text_that_is_not_a_traceback_is_one_text_block() -> None:
    assert [(b.kind, b.lines) for b in blocks("lease expired")] == [("text", ("lease expired",))]
    assert blocks("") == [] and blocks(None) == []
    assert folded_lines("worker process exited with signal 9 (SIGKILL) while handling it") \
        == ["worker process exited with signal 9 (SIGKILL) while handling it"]
    # A traceback cut at its start ("..." + the tail) still folds what is left.
    cut = '...e 4, in x\n  File "/app/h.py", line 2, in h\n    boom()\nOSError: disk full'
    assert [b.kind for b in blocks(cut)] == ["text", "frames", "text"]


def test_hailq_frames_are_recognised_by_install_path_not_by_a_name_alone() -> None:
    assert is_hailq_frame("/home/me/venv/lib/python3.12/site-packages/hailq/queue.py")
    assert is_hailq_frame("C:\\py\\Lib\\site-packages\\hailq\\runtime\\worker.py")
    assert is_hailq_frame("/work/checkout/src/hailq/message.py")
    assert not is_hailq_frame("/home/me/hailq/app.py")  # a user's project named hailq
    assert not is_hailq_frame("/app/jobs.py")


def test_signature_is_the_exception_line_or_the_last_line_cut_to_200() -> None:
    # A traceback: the first line after its last frame, however many the message has.
    assert signature(_recorded()) == "ValueError: card declined for 42"
    assert signature('Traceback (most recent call last):\n  File "/a.py", line 1, in f\n'
                     'KeyError: 1') == "KeyError: 1"
    # Any other text: its last non-empty line.
    assert signature("a\nb  \n\n") == "b"
    assert signature(None) == signature("  ") == "(no error text)"
    assert len(signature("x" * 500)) == 200


def _errors(*items: tuple[int, str, float]) -> list[AttemptError]:
    return [AttemptError(n, text, at) for n, text, at in items]


def test_distinct_lists_each_error_once_with_the_attempts_that_had_it() -> None:
    found = distinct(_errors((1, "boom", 10.0), (2, "boom", 20.0), (3, "lease expired", 30.0),
                             (4, "boom", 40.0), (5, "boom", 50.0), (6, "boom", 60.0)))
    assert [(d.error, d.attempts, d.first_at, d.last_at) for d in found] == [
        ("boom", (1, 2, 4, 5, 6), 10.0, 60.0), ("lease expired", (3,), 30.0, 30.0)]
    assert found[0].attempts_text == "#1, #2, #4–#6"
    assert distinct([]) == []


def _dead(id_: str, dead_at: float, *errors: tuple[int, str, float]) -> DeadMessage:
    return DeadMessage(id=id_, queue="q", body={}, headers={}, priority=0, ordering_key=None,
                       attempt=len(errors), enqueued_at=0.0, dead_at=dead_at,
                       errors=_errors(*errors))


def test_group_dead_counts_each_last_error_with_first_and_last_seen() -> None:
    tb = 'Traceback (most recent call last):\n  File "/app/h.py", line 1, in h\nKeyError: 1'
    letters = [
        _dead("A", 12.0, (1, "lease expired", 5.0), (2, tb, 11.0)),
        _dead("B", 31.0, (1, tb, 20.0), (2, tb, 30.0)),
        _dead("C", 40.0, (1, "timeout", 39.0)),
        _dead("D", 50.0),
    ]
    groups = group_dead(letters)
    assert [(g.signature, g.count, g.first_seen, g.last_seen, g.example_id)
            for g in groups] == [("KeyError: 1", 2, 11.0, 30.0, "A"),
                                 ("(no error text)", 1, 50.0, 50.0, "D"),
                                 ("timeout", 1, 39.0, 39.0, "C")]
    assert groups[0].example_error == tb
    assert group_dead([]) == []
