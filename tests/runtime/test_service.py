"""The one shape of background duties (runtime/service.py): ticks, wake-ups, a failing
tick that is retried, a close within its deadline, and services closed in reverse."""

from __future__ import annotations

import threading
import time

import pytest

from hailq.runtime.service import Service, Services


class Counting(Service):
    name = "test-counting"

    def __init__(self, interval: float, *, fail_first: bool = False,
                 wait_first: bool = False) -> None:
        super().__init__(interval, wait_first=wait_first)
        self.ticks = 0
        self.ticked = threading.Event()
        self.fail_first = fail_first
        self.closed_calls = 0

    def tick(self) -> float | None:
        self.ticks += 1
        self.ticked.set()
        if self.fail_first and self.ticks == 1:
            raise RuntimeError("the database is away")
        return None

    def closed(self) -> None:
        self.closed_calls += 1


def test_a_service_ticks_at_once_and_again_when_woken() -> None:
    service = Counting(3600.0)  # without wake() it would tick once an hour
    service.start()
    assert service.ticked.wait(5)
    service.ticked.clear()
    service.wake()
    assert service.ticked.wait(5) and service.ticks == 2
    service.close()
    assert service.closed_calls == 1


def test_wait_first_sleeps_before_its_first_tick() -> None:
    service = Counting(3600.0, wait_first=True)
    service.start()
    assert not service.ticked.wait(0.2)
    service.close()
    assert service.ticks == 0 and service.closed_calls == 1


def test_a_failing_tick_is_logged_and_tried_again(caplog: pytest.LogCaptureFixture) -> None:
    service = Counting(3600.0, fail_first=True)
    service.retry = 0.01
    service.start()
    deadline = time.monotonic() + 5
    while service.ticks < 2 and time.monotonic() < deadline:
        service.ticked.wait(0.1)
    service.close()
    assert service.ticks >= 2
    assert "a round failed" in caplog.text and "the database is away" in caplog.text


class Hanging(Service):
    name = "test-hanging"

    def __init__(self) -> None:
        super().__init__(1.0)
        self.entered, self.release = threading.Event(), threading.Event()

    def tick(self) -> float | None:
        self.entered.set()
        self.release.wait(30)
        return None


def test_close_returns_within_its_deadline_though_a_tick_hangs() -> None:
    service = Hanging()
    service.start()
    assert service.entered.wait(5)
    began = time.monotonic()
    service.close(deadline=0.2)
    assert time.monotonic() - began < 5
    service.release.set()


def test_services_start_in_order_and_close_in_reverse() -> None:
    order: list[str] = []

    class Named(Counting):
        def __init__(self, label: str) -> None:
            super().__init__(3600.0)
            self.label = label

        def start(self) -> None:
            order.append(f"start {self.label}")
            super().start()

        def closed(self) -> None:
            order.append(f"close {self.label}")

    group = Services([Named("registry"), Named("heartbeat")])
    group.add(Named("fetch"))
    group.start()
    group.close(deadline=5)
    assert order == ["start registry", "start heartbeat", "start fetch",
                     "close fetch", "close heartbeat", "close registry"]
