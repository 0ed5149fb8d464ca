-- hailq schema version 5 (SQLite): what operators and schedulers keep in the broker's
-- database, apart from what code declares.

-- Rate limits (rule 33): the limit is a setting a claim obeys (a column beside the
-- settings' JSON, so an operator's change reaches running consumers); the bucket is a
-- row per limited queue that every claim of the queue updates in its own transaction.
ALTER TABLE hailq_queues ADD COLUMN rate_per_second REAL;
ALTER TABLE hailq_queues ADD COLUMN burst REAL;
CREATE TABLE hailq_rate_buckets (
    queue TEXT PRIMARY KEY,
    tokens REAL NOT NULL,          -- tokens left as of refilled_at
    refilled_at REAL NOT NULL,
    taken INTEGER NOT NULL DEFAULT 0  -- what the last claim took (its statement returns it)
) WITHOUT ROWID;

-- Periodic schedules (rule 35), one row per name: what to send, when, and the last slot
-- sent. A scheduler claims a slot by moving last_slot in the transaction that sends it.
CREATE TABLE hailq_schedules (
    name TEXT PRIMARY KEY,
    queue TEXT NOT NULL,
    cron TEXT,                     -- a cron expression, or NULL with every
    every REAL,                    -- seconds between slots, or NULL with cron
    timezone TEXT NOT NULL DEFAULT 'UTC',
    catch_up INTEGER NOT NULL DEFAULT 0,
    body BLOB NOT NULL,
    body_kind INTEGER NOT NULL,
    headers TEXT,
    priority INTEGER NOT NULL DEFAULT 0,
    source TEXT NOT NULL,          -- 'app' (app.periodic) or 'broker' (broker.schedule)
    paused INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL,
    declared_at REAL NOT NULL,     -- last time a running scheduler declared it
    last_slot REAL NOT NULL,       -- the last slot sent (its creation time at first)
    fired_at REAL,
    fired INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

-- Figures per queue (rule 25), written by workers once a second, never per message
-- (hailq/observe/recorder.py). Histograms of wait (available -> handler start) and
-- handler time per priority, one row per bucket by its upper bound (le; +Inf stored as
-- the REAL infinity), cumulative since the queue was first measured.
CREATE TABLE hailq_histograms (
    queue TEXT NOT NULL,
    kind TEXT NOT NULL,
    priority INTEGER NOT NULL,
    le REAL NOT NULL,
    n INTEGER NOT NULL DEFAULT 0,
    total REAL NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, kind, priority, le)
) WITHOUT ROWID;

-- What happened per 10-second slot and priority: rates over the last minutes, breaches
-- of service levels with their time, the recent mean handler time. Kept an hour.
CREATE TABLE hailq_rates (
    queue TEXT NOT NULL,
    slot INTEGER NOT NULL,
    priority INTEGER NOT NULL,
    started INTEGER NOT NULL DEFAULT 0,
    acked INTEGER NOT NULL DEFAULT 0,
    failed INTEGER NOT NULL DEFAULT 0,
    breaches INTEGER NOT NULL DEFAULT 0,
    handler_total REAL NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, slot, priority)
) WITHOUT ROWID;

-- The queue's counters as a worker last saw them in each slot: sent and dead-lettered
-- per second come from the difference (no write per send). Kept an hour.
CREATE TABLE hailq_samples (
    queue TEXT NOT NULL,
    slot INTEGER NOT NULL,
    at REAL NOT NULL,
    sent INTEGER NOT NULL,
    dead_lettered INTEGER NOT NULL,
    PRIMARY KEY (queue, slot)
) WITHOUT ROWID;

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
