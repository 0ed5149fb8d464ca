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
ALTER TABLE {schema}.rates ADD COLUMN late_acks bigint NOT NULL DEFAULT 0;
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

-- desired_workers per queue (rules 25, 36): as in migration 4, with the arrival rate
-- taken as hailq/observe/figures.py takes sent_1m, over the span acked_1m shares: from
-- the last sample at or before a minute ago (over 60 s), else from zero at the queue's
-- creation for a queue younger than a minute, else from the first sample since.
-- For autoscalers that read SQL, such as KEDA's
-- postgresql trigger: SELECT desired_workers FROM <schema>.desired_workers WHERE queue =
-- 'claims'. A read. The same computation as hailq/policy/scaling.py over the same
-- figures as hailq/observe/figures.py (tests/observe compare the two): Little's law
-- (arrival rate x handler time) plus the ready backlog drained within the tightest
-- service level (else 60 s), never below the slots in flight, one more than run now
-- when the oldest ready message is older than the loosest target, at most what
-- max_in_flight lets work, at most what the rate limit keeps busy (rate x handler time
-- slots), at most the saturation point the autoscalers of the queue measured (the sum
-- of their points, when every one seen in the last 10 minutes has one), and at least
-- one whenever work is ready.
DROP VIEW {schema}.desired_workers;
CREATE VIEW {schema}.desired_workers AS
WITH t AS (
    SELECT {schema}.epoch() AS now
), q AS (
    SELECT qu.name AS queue, qu.max_in_flight, qu.max_attempts, qu.rate_per_second,
           qu.created_at,
           CASE WHEN jsonb_typeof(qu.settings::jsonb -> 'slo') = 'object'
                THEN qu.settings::jsonb -> 'slo' ELSE jsonb_build_object() END AS slo
    FROM {schema}.queues AS qu
), f AS (
    SELECT q.queue, q.max_in_flight, q.rate_per_second, t.now,
           (SELECT min(value::float8) FROM jsonb_each_text(q.slo)) AS tightest,
           (SELECT max(value::float8) FROM jsonb_each_text(q.slo)) AS loosest,
           m.ready, m.in_flight, t.now - m.oldest AS oldest_ready_age,
           CASE WHEN sb.at IS NOT NULL THEN greatest(coalesce(c.sent, 0) - sb.sent, 0) / 60.0
                WHEN q.created_at > t.now - 60 THEN
                    CASE WHEN t.now - q.created_at >= 1
                         THEN greatest(coalesce(c.sent, 0), 0) / (t.now - q.created_at) END
                WHEN sa.at IS NOT NULL AND t.now - sa.at >= 1
                THEN greatest(coalesce(c.sent, 0) - sa.sent, 0) / (t.now - sa.at)
           END AS arrival_rate,
           CASE WHEN r.finished > 0 THEN r.seconds / r.finished
                WHEN h.n > 0 THEN h.total / h.n END AS handler_time,
           coalesce(w.workers, 0) AS workers,
           greatest(coalesce(round(w.concurrency), 1), 1) AS concurrency,
           a.ceiling
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
        WHERE queue = q.queue AND slot <= floor(t.now - 60)::bigint ORDER BY slot DESC LIMIT 1
    ) AS sb ON true
    LEFT JOIN LATERAL (
        SELECT at, sent FROM {schema}.samples
        WHERE queue = q.queue AND slot > floor(t.now - 60)::bigint ORDER BY slot LIMIT 1
    ) AS sa ON true
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
    LEFT JOIN LATERAL (
        SELECT CASE WHEN count(*) > 0 AND count(*) = count(x.ceiling)
                    THEN sum(x.ceiling) END AS ceiling
        FROM (SELECT DISTINCT ON (autoscaler) ceiling FROM {schema}.autoscale
              WHERE queue = q.queue AND at >= t.now - 600
              ORDER BY autoscaler, seq DESC) AS x
    ) AS a ON true
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
), capped AS (
    SELECT l.*,
           least(late,
                 CASE WHEN max_in_flight IS NOT NULL
                      THEN greatest(ceil(max_in_flight::float8 / concurrency), 1) END,
                 CASE WHEN rate_per_second IS NOT NULL AND handler_time IS NOT NULL
                      THEN greatest(ceil(rate_per_second * handler_time / concurrency
                                         - 1e-9), 1) END,
                 CASE WHEN ceiling IS NOT NULL THEN greatest(ceiling, 1) END) AS wanted
    FROM l
)
SELECT queue, greatest(wanted, 0)::integer AS desired_workers,
       ready::integer AS ready, in_flight::integer AS in_flight, oldest_ready_age,
       arrival_rate, handler_time, workers::integer AS workers,
       concurrency::integer AS concurrency, now AS at,
       rate_per_second, ceiling::integer AS ceiling
FROM capped;
