#!/usr/bin/env python3
"""CPU instructions per message of a SQLite receive+ack cycle, counted by callgrind.

    .venv/bin/python scripts/cycle_instructions.py --batch 10

Wall-clock rates on a shared machine move by a third between runs; an instruction count
does not. Each loop runs twice under ``valgrind --tool=callgrind`` (hash seed fixed),
once with one cycle and once with ``--cycles`` more, on a database filled the same way
both times; the difference divided by the messages cycled is the cost of one message's
claim and ack, Python included, without start-up, fill and first calls (and without
the upkeep a claim runs every 50 ms of wall time, which callgrind's slowness and the
machine's load would make a varying share: see ``run_child``). With figures,
both runs flush once (at exit), so the difference holds the folding of each message's
values but not a flush's own statements, which at full speed are shared by the
thousands of messages of a second: ``--flushes N`` adds N flushes to the longer run
and prints what one costs. Loops: ``raw`` (the benchmark's bare loop),
``raw, same job`` (its lease doing a lease's job, see ``sqlite_floor.py``) and ``hailq``
(``queue.receive(batch)`` then ``queue.ack_many(...)``), and ``hailq, no figures`` (the
same on ``hailq.connect(url, figures=False)``: what counting every claim and ack costs,
its background thread included), and ``hailq, retained`` (``hailq`` on a queue with
``retain`` on: what writing each acked message's history row costs, rule 40).
``--sql FILE`` runs a file of SQL on the hailq loops' database after the fill: a schema
variant's cost measured before it becomes a migration. Time in the kernel (writing the
WAL) is not counted.
Needs valgrind; not part of ``make test``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from sqlite_floor import RawLeases, fill  # noqa: E402

from hailq.backends import core  # noqa: E402
from hailq.bench.raw import RawSQLite  # noqa: E402

LOOPS = ("raw", "raw, same job", "hailq", "hailq, no figures", "hailq, retained")


def run_child(loop: str, batch: int, cycles: int, fill_to: int, flushes: int = 0,
              sql: str = "") -> None:
    """Fill ``fill_to`` messages, then do ``cycles`` claims of ``batch`` and their acks
    (with ``flushes`` flushes of the figures spread over them)."""
    with tempfile.TemporaryDirectory(prefix="hailq-instr-") as folder:
        if loop.startswith("hailq"):
            # Upkeep and settings reads come every so many milliseconds of wall time,
            # so under callgrind's slowness (and a neighbour's load) every few messages:
            # once each here, so that both runs count the same work.
            core.MAINTAIN_EVERY = core.SETTINGS_FOR = float("inf")
            # retained: every ack writes a history row (rule 40)
            queue = fill(folder, fill_to, figures=loop != "hailq, no figures",
                         **({"retain": "1d"} if loop == "hailq, retained" else {}))
            if sql:
                with contextlib.closing(sqlite3.connect(f"{folder}/hailq.db")) as conn:
                    conn.executescript(Path(sql).read_text())
            if queue.recorder is not None:
                # One flush (at exit) for all the cycles: at full speed a flush a second
                # covers thousands of messages; under callgrind's slowness it would
                # cover a few, and its statements would be counted as each message's.
                # The fill started the flusher with the usual interval: stop it (writing
                # the fill's figures); the first claim starts one with this interval.
                queue.recorder.close()
                queue.recorder._interval = 3600.0
            every = cycles // flushes if flushes else 0
            for n in range(cycles):
                queue.ack_many(queue.receive(batch))
                if every and n % every == every - 1 and queue.recorder is not None:
                    queue.recorder.flush()
            return
        raw = (RawLeases if loop == "raw, same job" else RawSQLite)(f"{folder}/raw.db")
        raw.fill(fill_to)
        for _ in range(cycles):
            raw.ack(raw.claim(batch))
        raw.close()


def count(loop: str, batch: int, cycles: int, fill_to: int, flushes: int = 0,
          sql: str = "") -> int:
    """Instructions callgrind collected for one child run."""
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
         __file__, "--child", loop, "--batch", str(batch), "--cycles", str(cycles),
         "--fill", str(fill_to), "--flushes", str(flushes), "--sql", sql],
        capture_output=True, text=True, check=True,
        env={**os.environ, "PYTHONHASHSEED": "0"})
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise SystemExit(f"no instruction count from callgrind:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--cycles", type=int, default=200)
    parser.add_argument("--fill", type=int, default=0, help="messages sent first "
                        "(default: enough for the cycles)")
    parser.add_argument("--loop", action="append", choices=LOOPS, dest="loops",
                        help="a loop to count (repeatable; default: all)")
    parser.add_argument("--flushes", type=int, default=0,
                        help="flushes of the figures to measure one by (loop hailq)")
    parser.add_argument("--sql", default="", help="a file of SQL run on the hailq loops' "
                        "database after the fill (a schema variant)")
    parser.add_argument("--child", choices=LOOPS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    fill_to = args.fill or args.batch * (args.cycles + 1)
    if args.child:
        run_child(args.child, args.batch, args.cycles, fill_to, args.flushes, args.sql)
        return
    messages = args.batch * args.cycles
    per: dict[str, float] = {}
    chosen = args.loops or list(LOOPS)
    longer: dict[str, int] = {}
    for loop in chosen:
        longer[loop] = count(loop, args.batch, args.cycles + 1, fill_to, sql=args.sql)
        per[loop] = (longer[loop] - count(loop, args.batch, 1, fill_to, sql=args.sql)) / messages
    print(f"instructions per message, claims of {args.batch}, {messages:,} messages")
    for loop, value in per.items():
        ratios = "".join(f"   {base} / this: {per[base] / value:.2f}"
                         for base in ("raw", "raw, same job", "hailq, no figures", "hailq")
                         if base in per and base != loop)
        print(f"  {loop:14s} {value:>9,.0f}{ratios}")
    if args.flushes and "hailq" in longer:
        flushed = count("hailq", args.batch, args.cycles + 1, fill_to, args.flushes)
        print(f"  one flush of the figures: {(flushed - longer['hailq']) / args.flushes:,.0f}"
              f" (written about once a second)")


if __name__ == "__main__":
    main()
