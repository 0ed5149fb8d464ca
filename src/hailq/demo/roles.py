"""The programs around the checkers, each a process of its own: portal, statistics, crasher.

Run as ``python -m hailq.demo.roles ROLE URL ...``; each reports JSON lines on
stdout for the demo to read. They are separate processes because in the story
they are separate programs, and so the burst of sends does not compete with
the checkers for one interpreter.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from typing import Any

import hailq
from hailq.demo.results import save_partial
from hailq.demo.story import BATCH, STATISTICS, TOPIC, Plan, make_claims


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


def crash(url: str, queue_name: str, results: str, check_seconds: float) -> None:
    """A checker that takes one claim, saves a partial result, and dies by SIGKILL."""
    with hailq.connect(url) as broker:
        [message] = broker.get_queue(queue_name).receive(wait=30)
        body = message.body
        assert isinstance(body, dict)
        say(claim=body["claim"], message=message.id, attempt=message.attempt)
        time.sleep(check_seconds / 2)
        save_partial(results, body, f"crasher-{os.getpid()}")
        time.sleep(check_seconds / 4)
        os.kill(os.getpid(), signal.SIGKILL)  # mid-claim: no ack, no nack, no goodbye


def main(argv: list[str]) -> None:
    role, url, *rest = argv
    if role == "portal":
        portal(url, Plan.from_args(rest))
    elif role == "statistics":
        statistics(url, int(rest[0]), time.monotonic() + float(rest[1]))
    elif role == "crash":
        crash(url, rest[0], rest[1], float(rest[2]))
    else:
        raise SystemExit(f"unknown role {role!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
