#!/usr/bin/env python3
"""CPU instructions per message of a drain of keyed messages, counted by callgrind.

    .venv/bin/python scripts/keys_instructions.py --batch 10
    .venv/bin/python scripts/keys_instructions.py --batch 1 --plain
    .venv/bin/python scripts/keys_instructions.py --batch 1 --postgres postgresql://postgres@127.0.0.1:5432/test

Fills a fresh SQLite file with 4,000 messages over 2,000 ordering keys (``--plain``:
without keys) and drains it with ``receive(batch)`` then ``ack_many``, under
``valgrind --tool=callgrind``; once without the drain and once with it, so the
difference divided by the messages drained is one message's cost, SQLite's own work
included (it runs in the process). With ``--postgres URL`` the queue lives in that
database's schema ``hailq_keys_instructions`` (emptied first), and only the client's
instructions are counted, not the server's. Whatever hailq is first on ``PYTHONPATH`` is
counted, so the same script measures an older checkout. Needs valgrind; not part of
``make test``.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

N, KEYS = 4000, 2000


def drain(url: str, batch: int, most: int, plain: bool) -> None:
    import hailq

    with hailq.connect(url) as broker:
        queue = broker.queue("keys")
        queue.purge(dead=False)
        for start in range(0, N, 1000):
            queue.send_many([hailq.Envelope({"claim": 8311},
                                            ordering_key=None if plain else f"k-{i % KEYS}")
                             for i in range(start, start + 1000)])
        done = 0
        while done < most:
            got = queue.receive(batch)
            if not got:
                break
            queue.ack_many(got)
            done += len(got)
        print(f"DRAINED {done}", file=sys.stderr)


def count(batch: int, most: int, plain: bool, postgres: str | None) -> tuple[int, int]:
    """Total instructions of one child run, and how many messages it drained."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "callgrind.out"
        url = (f"sqlite:///{folder}/keys.db" if postgres is None
               else f"{postgres}{'&' if '?' in postgres else '?'}schema=hailq_keys_instructions")
        args = [sys.executable, __file__, "--child", url,
                "--batch", str(batch), "--most", str(most), *(["--plain"] if plain else [])]
        run = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                              *args], capture_output=True, text=True, check=True)
        drained = re.search(r"DRAINED (\d+)", run.stderr)
        total = re.search(r"summary: (\d+)", out.read_text())
        assert drained is not None and total is not None, run.stderr[-2000:]
        return int(total.group(1)), int(drained.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--plain", action="store_true", help="messages without keys")
    parser.add_argument("--postgres", metavar="URL", help="a PostgreSQL database instead")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--most", type=int, default=N, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        drain(args.child, args.batch, args.most, args.plain)
        return
    base, _ = count(args.batch, 0, args.plain, args.postgres)
    total, drained = count(args.batch, N, args.plain, args.postgres)
    kind = "plain" if args.plain else f"keyed ({KEYS:,} keys)"
    print(f"{kind}, batch {args.batch}: {(total - base) / drained:,.0f} instructions a "
          f"message over {drained:,} messages")


if __name__ == "__main__":
    main()
