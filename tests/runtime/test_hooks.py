"""Hooks around handlers (hailq/hooks.py), in real worker processes on both backends."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import hailq
from hailq.hooks import run_handler

from .conftest import StartWorker
from .support import wait_for

WRAPPED = ["A.enter", "B.enter", "A.before", "B.before", "handler"]


def _calls(effects: str, message_id: str) -> list[list[Any]]:
    path = Path(effects + ".hooks")
    if not path.exists():
        return []
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return [[what, detail] for what, mid, detail in lines if mid == message_id]


def _finished(effects: str, message_id: str) -> list[list[Any]]:
    return wait_for(lambda: (c := _calls(effects, message_id)) and c[-1][0] == "A.exit"
                    and c, timeout=30, what="the hooks to finish")  # type: ignore[no-any-return]


class RequestId(hailq.Hook):
    def before_send(self, destination: str, headers: dict[str, str]) -> None:
        headers["request-id"] = f"r-{destination}"


def test_hooks_run_in_order_and_a_failing_hook_changes_no_outcome(
        url: str, start_worker: StartWorker, effects: str, tmp_path: Path) -> None:
    with hailq.connect(url, hooks=[RequestId()]) as broker:
        ok = broker.queue("ok").send({"n": 1}, headers={"claim": "4711"})
        failed = broker.queue("fails", max_attempts=1).send({"n": 2})
        retried = broker.queue("retries", max_attempts=3,
                               retry={"base": 60, "jitter": 0}).send({"n": 3})
        worker = start_worker("hook_handlers:app", "--concurrency", "1")
        # The handler ran and saw the header a send hook added, and acked (Broken
        # failed in every method: logged, nothing else).
        assert _finished(effects, ok) == [[w, None] for w in WRAPPED[:-1]] + [
            ["handler", {"claim": "4711", "request-id": "r-ok"}],
            ["B.after", None], ["A.after", None], ["B.exit", None], ["A.exit", None]]
        assert _finished(effects, failed) == [[w, None] for w in WRAPPED] + [
            ["B.failure", "ValueError"], ["A.failure", "ValueError"],
            ["B.exit", "ValueError"], ["A.exit", "ValueError"]]
        assert _finished(effects, retried) == [[w, None] for w in WRAPPED] + [
            ["B.failure", "Retry"], ["A.failure", "Retry"],
            ["B.exit", "Retry"], ["A.exit", "Retry"]]
        # As each handler decided: acked, dead-lettered (its last attempt), retried.
        wait_for(lambda: broker.get_queue("ok").stats().acked == 1, what="the ack")
        wait_for(lambda: broker.get_queue("fails").stats().dead == 1, what="the dead letter")
        wait_for(lambda: broker.get_queue("retries").stats().scheduled == 1, what="the retry")
        assert broker.get_queue("ok").stats().dead == 0
        worker.terminate()
        worker.wait(30)
    log = (tmp_path / "worker0.log").read_text()
    for method in ("around_handler", "before_handler", "after_handler", "on_failure"):
        assert f"hook Broken failed in {method} for message " in log
    assert f"hook Broken failed in after_handler for message {ok} of queue ok" in log
    assert "RuntimeError: broken before_handler" in log  # with its traceback


def test_an_async_handler_sees_the_context_around_handler_made_current(
        url: str, start_worker: StartWorker, effects: str) -> None:
    with hailq.connect(url) as broker:
        sent = broker.queue("async").send({"n": 1})
        worker = start_worker("hook_handlers:app", "--concurrency", "2")
        calls = _finished(effects, sent)
        assert ["handler", f"req-{sent}"] in calls
        assert calls.index(["handler", f"req-{sent}"]) < calls.index(["B.after", None])
        wait_for(lambda: broker.get_queue("async").stats().acked == 1, what="the ack")
        worker.terminate()
        worker.wait(30)


def test_a_process_pool_child_runs_the_apps_hooks(
        url: str, start_worker: StartWorker, effects: str) -> None:
    with hailq.connect(url) as broker:
        sent = broker.queue("ok").send({"n": 1})
        worker = start_worker("hook_handlers:app", "-q", "ok", "--pool", "process",
                              "--concurrency", "1")
        assert [w for w, _ in _finished(effects, sent)][:2] == ["A.enter", "B.enter"]
        worker.terminate()
        worker.wait(30)


class Swallower(hailq.Hook):
    """Tries to swallow the handler's exception, and to break its own exit."""

    def __init__(self) -> None:
        self.exits: list[str] = []

    def around_handler(self, message: hailq.Message) -> Any:
        hook = self

        class Around:
            def __enter__(self) -> None:
                pass

            def __exit__(self, kind: Any, error: Any, tb: Any) -> bool:
                hook.exits.append(type(error).__name__)
                return True  # "suppress": ignored

        return Around()


class NoEntry(hailq.Hook):
    def around_handler(self, message: hailq.Message) -> Any:
        @contextmanager
        def around() -> Iterator[None]:
            raise RuntimeError("cannot enter")
            yield

        return around()


def test_no_hook_can_swallow_a_handlers_exception(sqlite_url: str,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    swallower = Swallower()
    with hailq.connect(sqlite_url) as broker:
        broker.queue("claims").send(1)
        [message] = broker.queue("claims").receive()

        def handler() -> None:
            raise ValueError("the claim is wrong")

        with pytest.raises(ValueError, match="the claim is wrong"):
            run_handler([NoEntry(), swallower], message, handler)
    assert swallower.exits == ["ValueError"]
    assert f"hook NoEntry failed in around_handler for message {message.id}" in caplog.text
