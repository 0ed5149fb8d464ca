-- hailq schema version 5 (PostgreSQL): figures over a stated window (rule 36) for every
-- consumer. Rate slots also count redeliveries and handler runs that used an inbox (the
-- doctor's window, rule 26) and are kept a day; log-bucket sketches of wait and handler
-- time per 10-second slot (bucket counts, and each slot's count, sum, minimum and
-- maximum) give percentiles within 2 % over any window of the last hour; acks are
-- counted per queue as recorders flush them, so the counter samples give sent, acked and
-- dead-lettered rates over one span. Each table that is pruned by age has an index on
-- its slot, so a prune is a bounded range delete.
ALTER TABLE {schema}.rates ADD COLUMN redelivered bigint NOT NULL DEFAULT 0;
ALTER TABLE {schema}.rates ADD COLUMN inbox bigint NOT NULL DEFAULT 0;
CREATE INDEX rates_slot ON {schema}.rates (slot);
ALTER TABLE {schema}.counters ADD COLUMN acked bigint NOT NULL DEFAULT 0;
ALTER TABLE {schema}.samples ADD COLUMN acked bigint NOT NULL DEFAULT 0;
CREATE INDEX samples_slot ON {schema}.samples (slot);
CREATE TABLE {schema}.sketches (
    queue text NOT NULL,
    kind text NOT NULL,                    -- wait or handler
    priority smallint NOT NULL,
    slot bigint NOT NULL,                  -- epoch seconds / 10
    bucket integer NOT NULL,               -- hailq/observe/sketch.py
    n bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, kind, priority, slot, bucket)
);
CREATE INDEX sketches_slot ON {schema}.sketches (slot);
CREATE TABLE {schema}.sketch_ranges (
    queue text NOT NULL,
    kind text NOT NULL,
    priority smallint NOT NULL,
    slot bigint NOT NULL,
    n bigint NOT NULL DEFAULT 0,
    total double precision NOT NULL DEFAULT 0,
    lo double precision NOT NULL,          -- the smallest value of the slot
    hi double precision NOT NULL,          -- the largest
    PRIMARY KEY (queue, kind, priority, slot)
);
CREATE INDEX sketch_ranges_slot ON {schema}.sketch_ranges (slot);
