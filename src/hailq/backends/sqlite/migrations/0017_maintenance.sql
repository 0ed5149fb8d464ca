-- hailq schema version 12 (SQLite): turns of the maintenance duties (hailq/backends/
-- upkeep.py). One row per duty; a process claims a duty's turn by moving its next_due on
-- (INSERT ... ON CONFLICT DO UPDATE ... WHERE next_due <= now, in the write transaction
-- SQLite runs one at a time), so however many workers run, a duty runs once per interval.
CREATE TABLE hailq_maintenance (
    duty TEXT PRIMARY KEY,
    next_due REAL NOT NULL,        -- the broker's clock: the next turn may be claimed then
    ran_at REAL NOT NULL,          -- when the last turn was claimed
    ran_by TEXT NOT NULL,          -- by whom (host:pid)
    runs INTEGER NOT NULL          -- turns claimed so far
) WITHOUT ROWID;
