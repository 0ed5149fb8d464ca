-- hailq schema version 7 (SQLite): figures over a stated window (rule 36) for every
-- consumer. Rate slots also count redeliveries and handler runs that used an inbox (the
-- doctor's window, rule 26) and are kept a day; log-bucket sketches of wait and handler
-- time per 10-second slot (bucket counts, and each slot's count, sum, minimum and
-- maximum) give percentiles within 2 % over any window of the last hour; acks are
-- counted per queue as recorders flush them, so the counter samples give sent, acked and
-- dead-lettered rates over one span. Each table that is pruned by age has an index on
-- its slot, so a prune is a bounded range delete.
ALTER TABLE hailq_rates ADD COLUMN redelivered INTEGER NOT NULL DEFAULT 0;
ALTER TABLE hailq_rates ADD COLUMN inbox INTEGER NOT NULL DEFAULT 0;
ALTER TABLE hailq_rates ADD COLUMN late_acks INTEGER NOT NULL DEFAULT 0;
CREATE INDEX hailq_rates_slot ON hailq_rates (slot);
ALTER TABLE hailq_counters ADD COLUMN acked INTEGER NOT NULL DEFAULT 0;
ALTER TABLE hailq_samples ADD COLUMN acked INTEGER NOT NULL DEFAULT 0;
CREATE INDEX hailq_samples_slot ON hailq_samples (slot);
CREATE TABLE hailq_sketches (
    queue TEXT NOT NULL,
    kind TEXT NOT NULL,            -- wait or handler
    priority INTEGER NOT NULL,
    slot INTEGER NOT NULL,         -- epoch seconds / 10
    bucket INTEGER NOT NULL,       -- hailq/observe/sketch.py
    n INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, kind, priority, slot, bucket)
) WITHOUT ROWID;
CREATE INDEX hailq_sketches_slot ON hailq_sketches (slot);
CREATE TABLE hailq_sketch_ranges (
    queue TEXT NOT NULL,
    kind TEXT NOT NULL,
    priority INTEGER NOT NULL,
    slot INTEGER NOT NULL,
    n INTEGER NOT NULL DEFAULT 0,
    total REAL NOT NULL DEFAULT 0,
    lo REAL NOT NULL,              -- the smallest value of the slot
    hi REAL NOT NULL,              -- the largest
    PRIMARY KEY (queue, kind, priority, slot)
) WITHOUT ROWID;
CREATE INDEX hailq_sketch_ranges_slot ON hailq_sketch_ranges (slot);
