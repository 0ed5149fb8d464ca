-- hailq schema version 5 (SQLite): what operators and schedulers keep in the broker's
-- database, apart from what code declares.

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
