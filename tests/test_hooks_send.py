"""Send hooks (hailq/hooks.py): around Queue.send, send_many, Topic.publish, on both backends."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

import hailq


class Recorder(hailq.Hook):
    def __init__(self, letter: str, calls: list[Any]) -> None:
        self.letter, self.calls = letter, calls

    def around_send(self, destination: str, operation: str) -> Any:
        @contextmanager
        def around() -> Iterator[None]:
            self.calls.append((f"{self.letter}.enter", destination, operation))
            try:
                yield
            except BaseException as exc:
                self.calls.append((f"{self.letter}.exit", type(exc).__name__))
                raise
            self.calls.append((f"{self.letter}.exit", None))

        return around()

    def before_send(self, destination: str, headers: dict[str, str]) -> None:
        self.calls.append((f"{self.letter}.before", dict(headers)))
        headers[f"by-{self.letter}"] = str(len(self.calls))

    def after_send(self, destination: str, ids: list[str]) -> None:
        self.calls.append((f"{self.letter}.after", ids))


class Broken(hailq.Hook):
    def around_send(self, destination: str, operation: str) -> Any:
        raise RuntimeError("broken around_send")

    def before_send(self, destination: str, headers: dict[str, str]) -> None:
        headers["half"] = "done"
        raise RuntimeError("broken before_send")

    def after_send(self, destination: str, ids: list[str]) -> None:
        raise RuntimeError("broken after_send")


class Unstorable(hailq.Hook):
    def before_send(self, destination: str, headers: dict[str, str]) -> None:
        headers["bad"] = "nul \x00 inside"


def test_send_hooks_run_in_order_and_their_headers_travel(url: str) -> None:
    calls: list[Any] = []
    with hailq.connect(url, hooks=[Recorder("A", calls)]) as broker:
        broker.add_hook(Recorder("B", calls))
        claims = broker.queue("claims")
        given = {"claim": "4711"}
        sent = claims.send({"n": 1}, headers=given)
        assert given == {"claim": "4711"}  # the caller's dict is not changed
        assert calls == [("A.enter", "claims", "send"), ("B.enter", "claims", "send"),
                         ("A.before", {"claim": "4711"}),
                         ("B.before", {"claim": "4711", "by-A": "3"}),
                         ("B.after", [sent]), ("A.after", [sent]),
                         ("B.exit", None), ("A.exit", None)]
        [message] = claims.receive()
        assert message.headers == {"claim": "4711", "by-A": "3", "by-B": "4"}
        message.ack()
        # A queue got before the hooks were added has them too (they are the broker's).
        calls.clear()
        ids = broker.get_queue("claims").send_many([1, hailq.Envelope(2, headers={"x": "y"})])
        assert [c[0] for c in calls] == ["A.enter", "B.enter", "A.before", "B.before",
                                         "A.before", "B.before", "B.after", "A.after",
                                         "B.exit", "A.exit"]
        assert ("A.after", ids) in calls
        got = {m.id: m.headers for m in claims.receive(2)}
        assert set(got[ids[0]]) == {"by-A", "by-B"}
        assert set(got[ids[1]]) == {"x", "by-A", "by-B"}


def test_publish_runs_the_hooks_once_and_every_copy_carries_the_headers(url: str) -> None:
    calls: list[Any] = []
    with hailq.connect(url, hooks=[Recorder("A", calls)]) as broker:
        events = broker.topic("claims-events")
        audit, billing = events.subscribe("audit"), events.subscribe("billing")
        copies = events.publish({"n": 1})
        assert calls[0] == ("A.enter", "claims-events", "publish")
        assert ("A.after", sorted(copies.values())) in [
            (c[0], sorted(c[1])) for c in calls if c[0] == "A.after"]
        for queue in (audit, billing):
            [message] = queue.receive()
            assert message.headers == {"by-A": "2"}


def test_a_failing_send_hook_is_logged_and_the_send_happens(
        url: str, caplog: pytest.LogCaptureFixture) -> None:
    calls: list[Any] = []
    with hailq.connect(url, hooks=[Broken(), Unstorable(), Recorder("A", calls)]) as broker:
        claims = broker.queue("claims")
        with caplog.at_level(logging.ERROR, logger="hailq.hooks"):
            sent = claims.send({"n": 1}, headers={"claim": "4711"})
        [message] = claims.receive()
        assert message.id == sent
        # Broken's half-done change and Unstorable's unstorable one are both undone.
        assert message.headers == {"claim": "4711", "by-A": "2"}
        text = caplog.text
        for method in ("around_send", "before_send", "after_send"):
            assert f"hook Broken failed in {method} for a send to claims" in text
        assert "hook Unstorable left headers hailq cannot store for a send to claims" in text


def test_a_send_that_fails_leaves_around_send_with_its_error_and_no_after_send(
        url: str) -> None:
    calls: list[Any] = []
    with hailq.connect(url, hooks=[Recorder("A", calls)]) as broker:
        claims = broker.queue("claims")
        with pytest.raises(hailq.InvalidArgument):
            claims.send({"n": 1}, priority=12)
        assert [c[0] for c in calls] == ["A.enter", "A.before", "A.exit"]
        assert calls[-1] == ("A.exit", "InvalidArgument")
        with pytest.raises(hailq.InvalidArgument, match="headers must be a dict"):
            claims.send({"n": 2}, headers=[("claim", "4711")])  # type: ignore[arg-type]
        assert claims.stats().ready == 0


def test_only_hooks_are_accepted(sqlite_url: str) -> None:
    with pytest.raises(hailq.InvalidArgument, match=r"hailq\.Hook"):
        hailq.connect(sqlite_url, hooks=[object()])  # type: ignore[list-item]
    with hailq.connect(sqlite_url) as broker:
        with pytest.raises(hailq.InvalidArgument, match=r"hailq\.Hook"):
            broker.add_hook(print)  # type: ignore[arg-type]
        assert broker.hooks == []
    with pytest.raises(hailq.InvalidArgument, match=r"hailq\.Hook"):
        hailq.App().hook("tracing")  # type: ignore[arg-type]
