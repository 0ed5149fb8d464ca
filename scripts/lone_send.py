"""What the committer costs a send that has nobody to share a commit with.

Single sends one after another, through ``Committer.send`` (as ``Queue.send`` does)
and straight to the backend, in alternating turns on one broker; prints the medians
and the median of the turns' ratios (1.0: no slower). Usage::

    python scripts/lone_send.py sqlite:////tmp/lone.db 3000
    python scripts/lone_send.py 'postgresql://postgres@127.0.0.1:5432/test?schema=hailq_lone' 1000
"""

from __future__ import annotations

import statistics
import sys
import time

import hailq
from hailq.backends.base import SendParams
from hailq.checks import Envelope
from hailq.committer import committer_for


def main(url: str, n: int, turns: int = 7) -> None:
    broker = hailq.connect(url)
    queue = broker.queue("lone")
    committer = committer_for(broker.backend)
    rates: dict[str, list[float]] = {"direct": [], "committer": []}
    for _ in range(turns):
        for name in rates:
            messages = [[queue._new(Envelope({"n": i}))] for i in range(n)]
            began = time.perf_counter()
            for one in messages:
                if name == "direct":
                    broker.backend.message_send(SendParams(one))
                else:
                    committer.send(one)
            rates[name].append(n / (time.perf_counter() - began))
            queue.purge()
    ratio = statistics.median(c / d for c, d in zip(rates["committer"], rates["direct"],
                                                       strict=True))
    print(f"direct {statistics.median(rates['direct']):,.0f}/s, through the committer "
          f"{statistics.median(rates['committer']):,.0f}/s, ratio {ratio:.3f}")
    broker.close()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 2000)
