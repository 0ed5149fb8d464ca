"""A producer process for the kill tests: ``python producer.py URL QUEUE N KIND``.

Connects, builds ``N`` numbered envelopes (KIND ``plain``, or ``dedup`` with a
dedup id each, which makes the send a longer multi-statement transaction),
prints ``ready``, calls ``send_many`` once, and prints ``done``.
"""

from __future__ import annotations

import sys

import hailq


def batch(n: int, kind: str, tag: str = "b") -> list[hailq.Envelope]:
    return [hailq.Envelope({"n": i, "pad": "x" * 200},
                           dedup_id=f"{tag}-{i}" if kind == "dedup" else None)
            for i in range(n)]


def main(url: str, queue: str, n: int, kind: str) -> None:
    with hailq.connect(url) as broker:
        q = broker.queue(queue)
        items = batch(n, kind)
        print("ready", flush=True)
        q.send_many(items)
        print("done", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4])
