#!/usr/bin/env python3
"""Where a PostgreSQL send's time goes, one part at a time, measured by pgbench.

    .venv/bin/python scripts/pg_send_parts.py --runs 3

Runs the server side of one-message sends without Python: pgbench, one connection,
prepared statements, each variant for ``--seconds``, with synchronous commit on (as
hailq's sends) and off (the same work without waiting for the WAL flush). The variants
build up from the bare loop's insert to hailq's whole ``message_insert_one`` statement,
rendered from ``queries.sql`` for a scratch schema this script creates and drops:

- ``bare``: the benchmark's bare loop, a 16-byte row under a sequential key;
- ``row``: a hailq message row with literal values;
- ``row + queue check``: inserted only where the queue exists (``FROM queues``);
- ``statement, no count, no wake``: hailq's statement without its counter and wake steps;
- ``statement, no wake`` and ``statement, no count``;
- ``statement``: hailq's whole send.

Needs pgbench (PostgreSQL's client tools); not part of ``make test``.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import tempfile
from pathlib import Path

import psycopg

import hailq

SCHEMA = "hailq_send_parts"


def variants(statement: str, schema: str) -> dict[str, str]:
    """pgbench scripts (SQL with :id) for each part, from hailq's rendered statement."""
    sql = " ".join(line for line in statement.splitlines()
                   if not line.strip().startswith("--"))
    values = {"%(id)s": "('m' || :id || clock_timestamp()::text)", "%(queue)s": "'q'",
              "%(delay)s": "0", "%(body)s": "'\\x7b7d'", "%(kind)s": "1",
              "%(headers)s": "NULL", "%(priority)s": "0", "%(aging)s": "60"}
    for name, value in values.items():
        sql = sql.replace(name, value)
    sql = sql.replace("%%", "%")
    counted = re.search(r"\), counted AS \(.*?(?=\), woken AS \()", sql, re.S)
    if counted is None:
        raise SystemExit("message_insert_one no longer has the counted step this script cuts")
    no_count = sql.replace(counted.group(0), "")
    no_wake = ", (SELECT count(*) FROM woken)"
    columns = ("id, queue, state, body, body_kind, headers, priority, sort_key, "
               "enqueued_at, available_at")
    row = ("'r' || :id || clock_timestamp()::text, 'q', 'ready', '\\x7b7d', 1, NULL, 0, "
           "1.5, 1.5, 1.5")
    table = f'"{schema}".messages'
    return {
        "bare": f'INSERT INTO "{schema}".bare (state, body) VALUES (0, \'\\x7b7d\')',
        "row": f"INSERT INTO {table} ({columns}) VALUES ({row}) ON CONFLICT (id) DO NOTHING",
        "row + queue check": f"INSERT INTO {table} ({columns}) SELECT {row} FROM "
                             f"\"{schema}\".queues WHERE name = 'q' ON CONFLICT (id) DO NOTHING",
        "statement, no count, no wake": no_count.replace(no_wake, ", 0"),
        "statement, no wake": sql.replace(no_wake, ", 0"),
        "statement, no count": no_count,
        "statement": sql,
    }


def pgbench(url: str, script: Path, seconds: int, synchronous: str) -> float:
    """Mean latency in microseconds of one pgbench run of ``script``."""
    info = psycopg.conninfo.conninfo_to_dict(url)
    done = subprocess.run(
        ["pgbench", "-n", "-M", "prepared", "-c", "1", "-T", str(seconds), "-f",
         str(script), "-h", str(info.get("host", "127.0.0.1")),
         "-p", str(info.get("port", 5432)), "-U", str(info.get("user", "postgres")),
         str(info.get("dbname", "postgres"))],
        capture_output=True, text=True, check=True,
        env={"PGOPTIONS": f"-c synchronous_commit={synchronous}", "PATH": "/usr/bin:/bin"})
    found = re.search(r"latency average = ([\d.]+) ms", done.stdout)
    if found is None:
        raise SystemExit(f"no latency from pgbench:\n{done.stdout}\n{done.stderr}")
    return float(found.group(1)) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=5)
    args = parser.parse_args()
    with psycopg.connect(args.postgres, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{SCHEMA}" CASCADE')
    broker = hailq.connect(f"{args.postgres}?schema={SCHEMA}")
    try:
        broker.queue("q")
        # The statement as this hailq renders it for the schema (a diagnostic's look inside).
        statement = broker.backend.dialect._q_durable["message_insert_one"]  # type: ignore[attr-defined]
        with psycopg.connect(args.postgres, autocommit=True) as conn:
            conn.execute(f'CREATE TABLE "{SCHEMA}".bare (id bigserial PRIMARY KEY, '
                         "state int NOT NULL, body bytea, lease timestamptz)")
            conn.execute(f'CREATE INDEX ON "{SCHEMA}".bare (id) WHERE state = 0')
        found: dict[tuple[str, str], list[float]] = {}
        with tempfile.TemporaryDirectory() as folder:
            scripts = {}
            for name, sql in variants(statement, SCHEMA).items():
                path = Path(folder) / f"{len(scripts)}.sql"
                path.write_text(f"\\set id random(1, 2000000000)\n{sql};\n")
                scripts[name] = path
            for _ in range(args.runs):  # in turns, so a slower moment hits every part
                for name, path in scripts.items():
                    for synchronous in ("on", "off"):
                        found.setdefault((name, synchronous), []).append(
                            pgbench(args.postgres, path, args.seconds, synchronous))
        print(f"µs per send, pgbench, 1 connection, medians of {args.runs} runs of "
              f"{args.seconds} s")
        print(f"  {'part':32s} {'synchronous':>12s} {'not synced':>11s}")
        for name in scripts:
            on = statistics.median(found[(name, "on")])
            off = statistics.median(found[(name, "off")])
            print(f"  {name:32s} {on:12.0f} {off:11.0f}")
    finally:
        broker.close()
        with psycopg.connect(args.postgres, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{SCHEMA}" CASCADE')


if __name__ == "__main__":
    main()
