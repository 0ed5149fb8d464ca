-- hailq schema version 6 (PostgreSQL): queue levels over time for the dashboard's charts
-- (rule 25; hailq/backends/levels.py). One row per queue and 10-second slot, written
-- once per slot by whichever worker or `hailq serve` comes first (INSERT ... ON CONFLICT
-- (queue, slot) DO NOTHING: no lock held between statements, PgBouncer's transaction
-- mode works), kept a little over an hour (levels_prune).
CREATE TABLE {schema}.levels (
    queue text NOT NULL,
    slot bigint NOT NULL,                  -- floor(at / 10)
    at double precision NOT NULL,          -- when counted, on the database's clock
    ready bigint NOT NULL,
    in_flight bigint NOT NULL,
    delayed bigint NOT NULL,
    blocked bigint NOT NULL,
    dead bigint NOT NULL,
    sent bigint NOT NULL,                  -- the queue's sent counter then
    acked bigint,                          -- its acked count then; NULL when capped
    capped boolean NOT NULL,               -- some count stopped at the limit
    PRIMARY KEY (queue, slot)
);
CREATE INDEX levels_slot ON {schema}.levels (slot);
