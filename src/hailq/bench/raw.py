"""The baseline: the same cycles with the bare driver and the least SQL that does the job.

Durability matches hailq's: sends are synced (SQLite ``synchronous=FULL``,
PostgreSQL synchronous commit), claims and acks are not (SQLite ``NORMAL``,
PostgreSQL ``synchronous_commit = off``). The SQLite file has hailq's page size.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any, Protocol

import psycopg

from hailq.backends.sqlite.backend import PAGE_SIZE


class RawCycle(Protocol):
    def reset(self) -> None: ...
    def send_one(self, body: bytes) -> None: ...
    def send_batch(self, bodies: list[bytes]) -> None: ...
    def fill(self, n: int) -> None: ...
    def claim(self, n: int) -> list[int]: ...
    def ack(self, ids: list[int]) -> None: ...
    def close(self) -> None: ...


class RawSQLite:
    def __init__(self, path: str) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None, timeout=60)
        self.synchronous = ""
        self.conn.execute(f"PRAGMA page_size={PAGE_SIZE}")  # the same as hailq's files
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("CREATE TABLE IF NOT EXISTS raw_jobs (id INTEGER PRIMARY KEY, "
                          "state INTEGER NOT NULL, body BLOB, lease REAL)")
        self.conn.execute("CREATE INDEX IF NOT EXISTS raw_ready ON raw_jobs (id) "
                          "WHERE state = 0")

    def _tx(self, sync: str, sql: str, args: Any = (), many: bool = False) -> list[Any]:
        if sync != self.synchronous:  # as hailq does: only when it changes
            self.conn.execute(f"PRAGMA synchronous={sync}")
            self.synchronous = sync
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            if many:
                self.conn.executemany(sql, args)
                rows: list[Any] = []
            else:
                rows = self.conn.execute(sql, args).fetchall()
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        return rows

    def reset(self) -> None:
        self.conn.execute("DELETE FROM raw_jobs")

    def send_one(self, body: bytes) -> None:
        self._tx("FULL", "INSERT INTO raw_jobs (state, body) VALUES (0, ?)", (body,))

    def send_batch(self, bodies: list[bytes]) -> None:
        self._tx("FULL", "INSERT INTO raw_jobs (state, body) VALUES (0, ?)",
                 [(b,) for b in bodies], many=True)

    def fill(self, n: int) -> None:
        self._tx("NORMAL",
                 "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < ?) "
                 "INSERT INTO raw_jobs (state, body) SELECT 0, x'7b7d' FROM c", (n,))

    def claim(self, n: int) -> list[int]:
        rows = self._tx("NORMAL", "UPDATE raw_jobs SET state = 1, lease = unixepoch() + 30 "
                        "WHERE id IN (SELECT id FROM raw_jobs WHERE state = 0 ORDER BY id "
                        "LIMIT ?) RETURNING id, body", (n,))
        return [r[0] for r in rows]

    def ack(self, ids: list[int]) -> None:
        marks = ",".join("?" * len(ids))
        self._tx("NORMAL", f"DELETE FROM raw_jobs WHERE id IN ({marks})", ids)

    def close(self) -> None:
        self.conn.close()


class RawPostgres:
    def __init__(self, conninfo: str, schema: str) -> None:
        self.conn = psycopg.connect(conninfo, autocommit=True)
        self.durable = psycopg.connect(conninfo, autocommit=True)
        self.conn.execute("SET synchronous_commit = off")
        self.t = f'"{schema}".raw_jobs'
        self._schema = schema
        self._shaped: str | None = None  # a table shaped like hailq's messages, if made
        self._sent = 0
        self.durable.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        self.durable.execute(f"CREATE TABLE IF NOT EXISTS {self.t} (id bigserial PRIMARY KEY, "
                             "state int NOT NULL, body bytea, lease timestamptz)")
        self.durable.execute(f"CREATE INDEX IF NOT EXISTS raw_ready ON {self.t} (id) "
                             "WHERE state = 0")

    def reset(self) -> None:
        self.durable.execute(f"TRUNCATE {self.t}")
        if self._shaped is not None:
            self.durable.execute(f"TRUNCATE {self._shaped}")

    def send_one(self, body: bytes) -> None:
        self.durable.execute(f"INSERT INTO {self.t} (state, body) VALUES (0, %s)", (body,))

    def shape_like(self, messages: str) -> None:
        """Make a table with the columns, defaults and indexes of hailq's ``messages``
        (``"schema".messages``), for ``send_one_row``."""
        self._shaped = f'"{self._schema}".raw_messages'
        self.durable.execute(f"CREATE TABLE IF NOT EXISTS {self._shaped} "
                             f"(LIKE {messages} INCLUDING ALL)")

    def send_one_row(self, body: bytes) -> None:
        """Insert one ready message row as hailq's send stores it, computed here: the bare
        loop of what a send writes, without the queue check, the count and the wake."""
        now = time.time()
        self._sent += 1
        self.durable.execute(
            f"INSERT INTO {self._shaped} (id, queue, state, body, body_kind, headers, "
            "priority, sort_key, enqueued_at, available_at) "
            "VALUES (%s, 'bench', 'ready', %s, 1, NULL, 0, %s, %s, %s)",
            (f"raw-{self._sent}", body, now, now, now))

    def send_batch(self, bodies: list[bytes]) -> None:
        self.durable.execute(f"INSERT INTO {self.t} (state, body) SELECT 0, b "
                             "FROM unnest(%s::bytea[]) AS b", (bodies,))

    def fill(self, n: int) -> None:
        self.conn.execute(f"INSERT INTO {self.t} (state, body) SELECT 0, '\\x7b7d'::bytea "
                          "FROM generate_series(1, %s)", (n,))
        self.conn.execute(f"VACUUM ANALYZE {self.t}")

    def claim(self, n: int) -> list[int]:
        rows = self.conn.execute(
            f"UPDATE {self.t} SET state = 1, lease = now() + interval '30 s' WHERE id IN "
            f"(SELECT id FROM {self.t} WHERE state = 0 ORDER BY id LIMIT %s "
            "FOR UPDATE SKIP LOCKED) RETURNING id, body", (n,)).fetchall()
        return [r[0] for r in rows]

    def ack(self, ids: list[int]) -> None:
        self.conn.execute(f"DELETE FROM {self.t} WHERE id = ANY(%s)", (ids,))

    def close(self) -> None:
        self.conn.close()
        self.durable.close()
