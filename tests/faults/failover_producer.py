"""A producer process for the failover tests: ``python failover_producer.py URL QUEUE FIRST
COUNT OUT``.

Sends messages ``{"n": FIRST}`` .. ``{"n": FIRST+COUNT-1}`` one at a time, each with
the dedup id ``fo-N``, as an application that must not lose a claim would: a
``StorageError`` is retried with the same dedup id until the send returns (for at
most a minute per message). Every send that returned is written to OUT at once as
``id n wall-clock-time`` (the ledger: acknowledged to the producer); every error
as ``! type wall-clock-time message``. Prints ``ready`` once connected, exits 0
when all were sent.
"""

from __future__ import annotations

import sys
import time

import hailq


def main(url: str, queue: str, first: int, count: int, out: str) -> int:
    with hailq.connect(url) as broker, open(out, "a", buffering=1) as log:
        q = broker.get_queue(queue)
        print("ready", flush=True)
        for n in range(first, first + count):
            give_up = time.monotonic() + 60
            while True:
                try:
                    message_id = q.send({"n": n}, dedup_id=f"fo-{n}")
                    break
                except hailq.StorageError as exc:
                    text = str(exc).replace("\n", " ")
                    log.write(f"! {type(exc).__name__} {time.time():.6f} {text}\n")
                    if time.monotonic() > give_up:
                        return 1
                    time.sleep(0.05)
            log.write(f"{message_id} {n} {time.time():.6f}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]))
