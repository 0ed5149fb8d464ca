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

-- Figures per queue (rule 25), written by workers once a second, never per message
-- (hailq/observe/recorder.py). Histograms of wait (available -> handler start) and
-- handler time per priority, one row per bucket by its upper bound (le, 'Infinity' for
-- +Inf), cumulative since the queue was first measured.
CREATE TABLE {schema}.histograms (
    queue text NOT NULL,
    kind text NOT NULL,
    priority smallint NOT NULL,
    le double precision NOT NULL,
    n bigint NOT NULL DEFAULT 0,
    total double precision NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, kind, priority, le)
);

-- What happened per 10-second slot and priority: rates over the last minutes, breaches
-- of service levels with their time, the recent mean handler time. Kept an hour.
CREATE TABLE {schema}.rates (
    queue text NOT NULL,
    slot bigint NOT NULL,
    priority smallint NOT NULL,
    started bigint NOT NULL DEFAULT 0,
    acked bigint NOT NULL DEFAULT 0,
    failed bigint NOT NULL DEFAULT 0,
    breaches bigint NOT NULL DEFAULT 0,
    handler_total double precision NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, slot, priority)
);

-- The queue's counters as a worker last saw them in each slot: sent and dead-lettered
-- per second come from the difference (no write per send). Kept an hour.
CREATE TABLE {schema}.samples (
    queue text NOT NULL,
    slot bigint NOT NULL,
    at double precision NOT NULL,
    sent bigint NOT NULL,
    dead_lettered bigint NOT NULL,
    PRIMARY KEY (queue, slot)
);

-- desired_workers per queue (rule 25) for autoscalers that read SQL, such as KEDA's
-- postgresql trigger: SELECT desired_workers FROM <schema>.desired_workers WHERE queue =
-- 'claims'. A read. The same computation as hailq/policy/scaling.py over the same
-- figures as hailq/observe/figures.py (tests/observe compare the two): Little's law
-- (arrival rate x handler time) plus the ready backlog drained within the tightest
-- service level (else 60 s), never below the slots in flight, one more than run now
-- when the oldest ready message is older than the loosest target, at most what
-- max_in_flight lets work, and at least one whenever work is ready.
CREATE VIEW {schema}.desired_workers AS
WITH t AS (
    SELECT {schema}.epoch() AS now
), q AS (
    SELECT qu.name AS queue, qu.max_in_flight, qu.max_attempts,
           CASE WHEN jsonb_typeof(qu.settings::jsonb -> 'slo') = 'object'
                THEN qu.settings::jsonb -> 'slo' ELSE jsonb_build_object() END AS slo
    FROM {schema}.queues AS qu
), f AS (
    SELECT q.queue, q.max_in_flight, t.now,
           (SELECT min(value::float8) FROM jsonb_each_text(q.slo)) AS tightest,
           (SELECT max(value::float8) FROM jsonb_each_text(q.slo)) AS loosest,
           m.ready, m.in_flight, t.now - m.oldest AS oldest_ready_age,
           CASE WHEN s.at IS NOT NULL AND t.now - s.at >= 1
                THEN greatest(coalesce(c.sent, 0) - s.sent, 0) / (t.now - s.at)
           END AS arrival_rate,
           CASE WHEN r.finished > 0 THEN r.seconds / r.finished
                WHEN h.n > 0 THEN h.total / h.n END AS handler_time,
           coalesce(w.workers, 0) AS workers,
           greatest(coalesce(round(w.concurrency), 1), 1) AS concurrency
    FROM q CROSS JOIN t
    CROSS JOIN LATERAL (
        SELECT count(*) FILTER (WHERE ready) AS ready,
               count(*) FILTER (WHERE state = 'leased' AND lease_until > t.now) AS in_flight,
               min(enqueued_at) FILTER (WHERE ready) AS oldest
        FROM (SELECT state, lease_until, enqueued_at,
                     state = 'ready' OR (state = 'scheduled' AND available_at <= t.now)
                     OR (state = 'leased' AND lease_until <= t.now
                         AND attempt < q.max_attempts) AS ready
              FROM {schema}.messages
              WHERE queue = q.queue AND state IN ('ready', 'scheduled', 'leased')) AS mm
    ) AS m
    LEFT JOIN LATERAL (
        SELECT at, sent FROM {schema}.samples
        WHERE queue = q.queue AND at >= t.now - 60 ORDER BY at LIMIT 1
    ) AS s ON true
    CROSS JOIN LATERAL (
        SELECT sum(sent) AS sent FROM {schema}.counters WHERE queue = q.queue
    ) AS c
    CROSS JOIN LATERAL (
        SELECT coalesce(sum(acked + failed) FILTER (
                   WHERE slot >= floor((t.now - 300) / 10)), 0) AS finished,
               coalesce(sum(handler_total) FILTER (
                   WHERE slot >= floor((t.now - 300) / 10)), 0) AS seconds
        FROM {schema}.rates WHERE queue = q.queue AND slot >= floor((t.now - 310) / 10)
    ) AS r
    CROSS JOIN LATERAL (
        SELECT sum(n) AS n, sum(total) AS total FROM {schema}.histograms
        WHERE queue = q.queue AND kind = 'handler'
    ) AS h
    LEFT JOIN LATERAL (
        SELECT count(*) AS workers, avg(concurrency) AS concurrency FROM {schema}.workers
        WHERE state = 'running' AND queues::jsonb ? q.queue AND t.now - last_seen <= 15
    ) AS w ON true
), d AS (
    SELECT f.*,
           CASE WHEN handler_time IS NULL THEN
                    CASE WHEN ready > 0
                         THEN greatest(ceil(in_flight::float8 / concurrency), workers, 1)
                         ELSE ceil(in_flight::float8 / concurrency) END
                ELSE
                    CASE WHEN ready > 0 THEN greatest(w.n, 1) ELSE w.n END
           END AS base
    FROM f CROSS JOIN LATERAL (
        SELECT ceil(greatest(coalesce(arrival_rate, 0) * handler_time
                             + ready * handler_time / coalesce(tightest, 60),
                             in_flight) / concurrency - 1e-9) AS n
    ) AS w
), l AS (
    SELECT d.*,
           CASE WHEN ready > 0 AND oldest_ready_age > coalesce(loosest, 60)
                THEN greatest(base, workers + 1) ELSE base END AS late
    FROM d
)
SELECT queue,
       greatest(CASE WHEN max_in_flight IS NOT NULL
                     THEN least(late, greatest(ceil(max_in_flight::float8 / concurrency), 1))
                     ELSE late END, 0)::integer AS desired_workers,
       ready::integer AS ready, in_flight::integer AS in_flight, oldest_ready_age,
       arrival_rate, handler_time, workers::integer AS workers,
       concurrency::integer AS concurrency, now AS at
FROM l;

-- Operator state of a queue, kept apart from what code declares: queue_save (which
-- every worker runs as it starts) never writes here, so a pause and an operator's
-- setting overrides survive restarts and deploys. ``overrides`` is a JSON object of
-- settings laid over the declared ones (docs/guides/operating.md); a queue without a
-- row is running and has none.
CREATE TABLE {schema}.queue_ops (
    name text PRIMARY KEY,
    paused boolean NOT NULL DEFAULT false,
    overrides text,
    updated_at double precision NOT NULL
);

-- A receiver about to sleep ignores paused queues: a ready message there must not
-- make it look again at once (it would spin while the queue stays paused). As
-- migration 2's wait_begin otherwise.
CREATE OR REPLACE FUNCTION {schema}.wait_begin(qs text[], who text, seconds double precision)
RETURNS integer LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    q text;
    busy boolean := false;
BEGIN
    DELETE FROM {schema}.waiters
    WHERE queue = ANY(qs) AND until < extract(epoch from clock_timestamp()) - 60;
    INSERT INTO {schema}.waiters AS w (queue, waiter, until)
    SELECT DISTINCT u, who, extract(epoch from clock_timestamp()) + seconds
    FROM unnest(qs) AS u
    ON CONFLICT (queue, waiter) DO UPDATE SET until = greatest(w.until, excluded.until);
    FOREACH q IN ARRAY qs LOOP
        IF NOT pg_try_advisory_xact_lock(hashtextextended('hailq wake ' || q, 0)) THEN
            busy := true;
        END IF;
    END LOOP;
    IF EXISTS (SELECT 1 FROM {schema}.messages m
               WHERE m.queue = ANY(qs) AND m.state = 'ready'
                 AND NOT EXISTS (SELECT 1 FROM {schema}.queue_ops o
                                 WHERE o.name = m.queue AND o.paused)) THEN
        RETURN 1;
    END IF;
    RETURN CASE WHEN busy THEN 2 ELSE 0 END;
END
$$;
