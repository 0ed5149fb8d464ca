-- hailq schema version 3 (PostgreSQL): what operators and schedulers keep in the broker's
-- database, apart from what code declares.
SELECT 1;

-- Rate limits (rule 33): the limit is a setting a claim obeys (a column beside the
-- settings' JSON, so an operator's change reaches running consumers); the bucket is a
-- row per limited queue that every claim of the queue locks and updates in its own
-- transaction (unlimited queues never touch it).
ALTER TABLE {schema}.queues
    ADD COLUMN rate_per_second double precision,
    ADD COLUMN burst double precision;
CREATE TABLE {schema}.rate_buckets (
    queue text PRIMARY KEY,
    tokens double precision NOT NULL,      -- tokens left as of refilled_at
    refilled_at double precision NOT NULL,
    taken integer NOT NULL DEFAULT 0       -- what the last claim took (returned to it)
);

-- Periodic schedules (rule 35), one row per name: what to send, when, and the last slot
-- sent. A scheduler claims a slot by moving last_slot in the transaction that sends it.
CREATE TABLE {schema}.schedules (
    name text PRIMARY KEY,
    queue text NOT NULL,
    cron text,                             -- a cron expression, or NULL with every
    every double precision,                -- seconds between slots, or NULL with cron
    timezone text NOT NULL DEFAULT 'UTC',
    catch_up integer NOT NULL DEFAULT 0,
    body bytea NOT NULL,
    body_kind integer NOT NULL,
    headers text,
    priority integer NOT NULL DEFAULT 0,
    source text NOT NULL,                  -- 'app' (app.periodic) or 'broker' (broker.schedule)
    paused boolean NOT NULL DEFAULT false,
    created_at double precision NOT NULL,
    declared_at double precision NOT NULL, -- last time a running scheduler declared it
    last_slot double precision NOT NULL,   -- the last slot sent (its creation time at first)
    fired_at double precision,
    fired bigint NOT NULL DEFAULT 0
);
