"""Programs of the story that run as processes of their own: portal, statistics, a checker.

Run as ``python -m hailq.demo.roles ROLE URL ...``; each reports JSON lines on
stdout for the demo to read. They are separate processes because in the story
they are separate programs, so the burst of sends does not compete with the
checkers for one interpreter, and so a checker can really crash (SIGKILL).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from typing import Any

import hailq
from hailq.demo.checkers import LoneChecker, make_check
from hailq.demo.results import ResultStore, save_partial
from hailq.demo.story import BATCH, CHECKS, STATISTICS, TOPIC, Plan, make_claims


def say(**fields: Any) -> None:
    """One JSON line to the demo."""
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def portal(url: str, plan: Plan) -> None:
    """The customer portal: waits for a line on stdin, then sends the burst in batches."""
    claims = make_claims(plan)
    envelopes = [hailq.Envelope(c.body(), priority=c.priority, ordering_key=c.contract)
                 for c in claims]
    with hailq.connect(url) as broker:
        topic = broker.topic(TOPIC)
        say(ready=True)
        sys.stdin.readline()
        for first in range(0, len(envelopes), BATCH):
            batch = envelopes[first:first + BATCH]
            before = time.monotonic()
            topic.publish_many(batch)  # one transaction: both copies of every claim
            say(first=first, count=len(batch), before=before, after=time.monotonic())
    say(done=True)


def statistics(url: str, expected: int, deadline: float) -> None:
    """The statistics program: counts every claim once, in big batches, until all are in."""
    seen: set[int] = set()
    vip = 0
    with hailq.connect(url) as broker:
        queue = broker.get_queue(STATISTICS)
        while len(seen) < expected and time.monotonic() < deadline:
            messages = queue.receive(max_messages=500, wait=0.5)
            for message in messages:
                body = message.body
                assert isinstance(body, dict)
                if body["claim"] not in seen:
                    seen.add(body["claim"])
                    vip += bool(body["vip"])
            if messages:
                queue.ack_many(messages)
                say(count=len(seen), vip=vip)
    say(done=True, count=len(seen), vip=vip)


class LineObserver:
    """A checker process's ``Observer``: each observation is a JSON line for the demo."""

    def start(self, claim: int, attempt: int) -> None:
        say(start=claim, attempt=attempt, at=time.monotonic())

    def finish(self, fresh: bool) -> None:
        say(finish=True, fresh=fresh, at=time.monotonic())

    def event(self, text: str) -> None:
        say(event=text)


def checker(url: str, results: str, name: str) -> None:
    """An image checker in a process of its own, commanded by lines on stdin.

    It says ``ready`` and waits for ``go``; then it checks claims one at a time
    (a ``LoneChecker``) until stdin ends. After ``crash`` it dies on its next
    claim (not the corrupt one: that is another mishap), mid-check: it saves a
    partial result, then kills itself with SIGKILL, no ack, no nack, no goodbye.
    """
    go, crash, stop = threading.Event(), threading.Event(), threading.Event()

    def read_commands() -> None:
        for line in sys.stdin:
            if line.strip() == "go":
                go.set()
            elif line.strip() == "crash":
                crash.set()
        stop.set()
        go.set()

    threading.Thread(target=read_commands, name="commands", daemon=True).start()
    threading.current_thread().name = name  # the checker named in the results
    observer = LineObserver()

    def die_mid_check(message: hailq.Message) -> bool:
        claim = message.body
        assert isinstance(claim, dict)
        if not crash.is_set() or claim["corrupt"]:
            return False
        observer.start(int(claim["claim"]), message.attempt)
        say(crash=claim["claim"], message=message.id, attempt=message.attempt)
        check = float(claim["check_ms"]) / 1000
        time.sleep(check / 2)
        save_partial(results, claim, name)
        time.sleep(check / 4)
        os.kill(os.getpid(), signal.SIGKILL)
        return True  # not reached

    with hailq.connect(url) as broker:
        queue = broker.get_queue(CHECKS)
        store = ResultStore(results)
        say(ready=True)
        go.wait()
        try:
            LoneChecker(queue, make_check(store, observer), die_mid_check).run(stop)
        finally:
            store.close()
    say(done=True)


def main(argv: list[str]) -> None:
    role, url, *rest = argv
    if role == "portal":
        portal(url, Plan.from_args(rest))
    elif role == "statistics":
        statistics(url, int(rest[0]), time.monotonic() + float(rest[1]))
    elif role == "checker":
        checker(url, rest[0], rest[1])
    else:
        raise SystemExit(f"unknown role {role!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
