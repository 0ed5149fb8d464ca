-- hailq schema version 5 (SQLite): what operators and schedulers keep in the broker's
-- database, apart from what code declares.

-- Operator state of a queue, kept apart from what code declares: queue_save (which
-- every worker runs as it starts) never writes here, so a pause and an operator's
-- setting overrides survive restarts and deploys. ``overrides`` is a JSON object of
-- settings laid over the declared ones (docs/guides/operating.md); a queue without a
-- row is running and has none.
CREATE TABLE hailq_queue_ops (
    name TEXT PRIMARY KEY,
    paused INTEGER NOT NULL DEFAULT 0,
    overrides TEXT,
    updated_at REAL NOT NULL
) WITHOUT ROWID;
