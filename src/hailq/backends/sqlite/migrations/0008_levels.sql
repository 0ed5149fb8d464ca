-- hailq schema version 8 (SQLite): queue levels over time for the dashboard's charts
-- (rule 25; hailq/backends/levels.py). One row per queue and 10-second slot, written
-- once per slot by whichever worker or `hailq serve` comes first (INSERT ... ON CONFLICT
-- (queue, slot) DO NOTHING), kept a little over an hour (levels_prune).
CREATE TABLE hailq_levels (
    queue TEXT NOT NULL,
    slot INTEGER NOT NULL,         -- floor(at / 10)
    at REAL NOT NULL,              -- when counted, on the broker's clock
    ready INTEGER NOT NULL,
    in_flight INTEGER NOT NULL,
    delayed INTEGER NOT NULL,
    blocked INTEGER NOT NULL,
    dead INTEGER NOT NULL,
    sent INTEGER NOT NULL,         -- the queue's sent counter then
    acked INTEGER,                 -- its acked count then; NULL when a count was capped
    capped INTEGER NOT NULL,       -- 1: some count stopped at the limit
    PRIMARY KEY (queue, slot)
) WITHOUT ROWID;
CREATE INDEX hailq_levels_slot ON hailq_levels (slot);
