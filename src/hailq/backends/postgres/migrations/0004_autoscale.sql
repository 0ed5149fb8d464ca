-- hailq schema version 4 (PostgreSQL): the decisions of `hailq autoscale` (rule 24), one
-- row per tick of each autoscaler, with its reason and the saturation point it measured.
-- Kept an hour (autoscale_prune). desired_workers now also obeys the rate limit and that
-- saturation point.
CREATE TABLE {schema}.autoscale (
    seq bigserial PRIMARY KEY,
    autoscaler text NOT NULL,              -- host:pid:queue
    queue text NOT NULL,
    host text NOT NULL,
    pid integer NOT NULL,
    at double precision NOT NULL,
    workers integer NOT NULL,              -- processes it runs from this decision on
    desired integer NOT NULL,              -- what the backlog asks, within its bounds
    decision text NOT NULL,                -- grow, shrink or hold
    reason text NOT NULL,
    ceiling integer,                       -- the measured saturation point, while it holds
    minimum integer NOT NULL,
    maximum integer NOT NULL,
    throughput double precision,           -- completions per second in its last window
    handler_time double precision          -- mean handler seconds in its last window
);
CREATE INDEX autoscale_queue ON {schema}.autoscale (queue, at);
CREATE INDEX autoscale_at ON {schema}.autoscale (at);

-- desired_workers per queue (rule 25) for autoscalers that read SQL, such as KEDA's
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
           CASE WHEN jsonb_typeof(qu.settings::jsonb -> 'slo') = 'object'
                THEN qu.settings::jsonb -> 'slo' ELSE jsonb_build_object() END AS slo
    FROM {schema}.queues AS qu
), f AS (
    SELECT q.queue, q.max_in_flight, q.rate_per_second, t.now,
           (SELECT min(value::float8) FROM jsonb_each_text(q.slo)) AS tightest,
           (SELECT max(value::float8) FROM jsonb_each_text(q.slo)) AS loosest,
           m.ready, m.in_flight, t.now - m.oldest AS oldest_ready_age,
           CASE WHEN s.at IS NOT NULL AND t.now - s.at >= 1
                THEN greatest(coalesce(c.sent, 0) - s.sent, 0) / (t.now - s.at)
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
