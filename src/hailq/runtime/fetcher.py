"""The fetch loop: one thread asks for work only for free slots (no prefetch).

Each round asks the queues, in the order's plan, for as many messages as
there are free slots (``receive(max_messages=free)``), and hands each one to
``dispatch`` with the slot it runs in. A claim names who runs each message, the
worker and that slot ("worker host:pid slot 2"), as history records it (rule 40).
When every queue is empty it long-polls the broker (``Broker.wait``) on all its
queues at once, so an idle worker makes one cheap wait, not one per slot or queue.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import KW_ONLY, dataclass
from typing import TYPE_CHECKING

from hailq.errors import HailqError
from hailq.outage import covers
from hailq.queue import Message, Queue
from hailq.runtime.acks import AckBatcher
from hailq.runtime.inflight import InFlight
from hailq.runtime.order import Order
from hailq.runtime.signals import StopFlag

if TYPE_CHECKING:
    from hailq.broker import Broker

log = logging.getLogger("hailq.worker")


@dataclass(eq=False)
class Fetcher:
    """Runs the fetch loop in a thread of its own until ``flag`` says stop."""

    broker: Broker
    queues: Mapping[str, Queue]
    order: Order
    inflight: InFlight
    dispatch: Callable[[Message, int], None]  # a message and the slot it runs in
    flag: StopFlag
    _: KW_ONLY
    poll: float = 1.0
    acks: AckBatcher | None = None

    def __post_init__(self) -> None:
        self._thread = threading.Thread(target=self._run, name="hailq-fetch", daemon=True)
        self._slots: list[int] = []  # the free slots this round hands out, lowest first

    def start(self) -> None:
        self._thread.start()

    @property
    def alive(self) -> bool:
        """Whether the fetch loop runs (a worker's liveness probe asks)."""
        return self._thread.is_alive()

    def join(self, timeout: float) -> bool:
        """Wait for the loop to end (it ends within one wait after a stop); True if it did."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _run(self) -> None:
        failures = 0
        waited = False  # the last round found nothing and waited
        while not self.flag.stopping:
            free = self.inflight.wait_free(0.1)
            if not free or self.flag.stopping:
                continue
            try:
                got = self._fetch(free)
                if not got:
                    self._wait()
                elif waited:
                    # Woken from idle: let the slots just handed messages take the GIL
                    # before this thread prepares its next claim (docs/performance.md,
                    # workers). Not while draining, where the next claim comes first.
                    time.sleep(0)
                waited = not got
                failures = 0
            except Exception as exc:  # the loop must outlive any storage trouble
                failures += 1
                delay = min(0.1 * 2 ** failures, 5.0)
                if not covers(exc):  # an outage has lines of its own (hailq/outage.py)
                    log.error("receiving failed (%s); retrying in %.1f s", exc, delay,
                              exc_info=not isinstance(exc, HailqError))
                self._sleep(delay)

    def _fetch(self, free: int) -> int:
        """Ask the queues for up to ``free`` messages in plan order; return how many came.

        Acks still pending go out with the first claim, in the same transaction, so
        finished work is never still leased when new work arrives.
        """
        got = 0
        short: set[str] = set()
        self._slots = self.inflight.free_slots()  # only this thread fills slots
        plan = self.order.plan(free)
        served = dict.fromkeys((name for name, _ in plan), 0)  # the order learns who gave
        carry = 0
        with self._handover() as finished:
            for name, share in plan:
                want = share + carry
                received = self._receive(name, want, finished)
                finished = []
                served[name] += received
                got += received
                carry = want - received
                if received < want:
                    short.add(name)
        for name, _ in plan:
            if carry <= 0:
                break
            if name not in short:
                received = self._receive(name, carry, [])
                served[name] += received
                got += received
                carry -= received
        self.order.served(served)
        return got

    def _handover(self) -> AbstractContextManager[list[Message]]:
        return self.acks.handover() if self.acks is not None else nullcontext([])

    def _receive(self, name: str, want: int, finished: list[Message]) -> int:
        if self.flag.stopping or want <= 0:
            self._ack_only(finished)
            return 0
        queue, slots = self.queues[name], self._slots[:want]
        who = [f"{queue.consumer} slot {n}" for n in slots] if queue.consumer else ()
        results, messages = queue.ack_and_receive(finished, want, consumers=who)
        if finished and self.acks is not None:
            self.acks.record(finished, results)
        for i, message in enumerate(messages):  # never more than slots were free
            self.dispatch(message, slots[i] if i < len(slots) else 0)
        del self._slots[:len(messages)]
        return len(messages)

    def _ack_only(self, finished: list[Message]) -> None:
        by_queue: dict[str, list[Message]] = {}
        for message in finished:
            by_queue.setdefault(message.queue, []).append(message)
        for group in by_queue.values():
            results = group[0].source.ack_many(group)
            if self.acks is not None:
                self.acks.record(group, results)

    def _wait(self) -> None:
        self.broker.wait(list(self.order.queues), self.poll)

    def _sleep(self, seconds: float) -> None:
        waited = 0.0
        while waited < seconds and not self.flag.stopping:
            step = min(0.1, seconds - waited)
            time.sleep(step)
            waited += step
