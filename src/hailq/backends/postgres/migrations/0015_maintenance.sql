-- hailq schema version 10 (PostgreSQL): turns of the maintenance duties (hailq/backends/
-- upkeep.py). One row per duty; a process claims a duty's turn by moving its next_due on
-- (INSERT ... ON CONFLICT DO UPDATE ... WHERE next_due <= now: the row's lock lasts the
-- statement's transaction only, so PgBouncer's transaction mode works), so however many
-- workers run, a duty runs once per interval.
CREATE TABLE {schema}.maintenance (
    duty text PRIMARY KEY,
    next_due double precision NOT NULL,    -- the database's clock: the next turn from then
    ran_at double precision NOT NULL,      -- when the last turn was claimed
    ran_by text NOT NULL,                  -- by whom (host:pid)
    runs bigint NOT NULL                   -- turns claimed so far
);
