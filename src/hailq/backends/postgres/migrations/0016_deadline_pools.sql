-- hailq schema version 16 (PostgreSQL): desired_workers of a queue in deadline order
-- (rule 41) in the view too. That figure is the smallest pool with which deadline order
-- meets every target, found by simulating the schedule over the backlog and the arrivals
-- (hailq/policy/pool.py): a search SQL would only copy, and copies drift. So the Python
-- side computes it and keeps it here: the maintenance duty "deadline_pools"
-- (hailq/runtime/maintenance.py), run by every worker and `hailq serve` in turns, stores
-- each deadline queue's pool every 10 seconds, as Queue.figures() finds it at that moment
-- (before the autoscalers' saturation point, which the view applies as it does for every
-- queue). One row per queue, replaced at each turn; rows not replaced for an hour (a queue
-- deleted or no longer in deadline order) go at the next turn.
CREATE TABLE {schema}.deadline_pools (
    queue text PRIMARY KEY,
    workers integer NOT NULL,              -- the pool: worker processes
    reason text,                           -- why no pool meets every target (NULL: one does)
    at double precision NOT NULL           -- the database's clock when it was stored
);

-- desired_workers as in migration 5, and for a queue in deadline order (queues.deadlines
-- set) whose pool was stored in the last 60 seconds, that pool (capped by the
-- autoscalers' saturation point) instead. pool_at says when it was stored and pool_reason
-- why no pool meets every target; both NULL where the view computed the figure itself:
-- a queue in priority order, or a deadline queue with no fresh pool (no worker or
-- `hailq serve` has run the duty in the last minute), which then gets the figure of
-- migration 5 until one does.
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
SELECT c.queue,
       CASE WHEN p.workers IS NOT NULL
            THEN least(p.workers, CASE WHEN c.ceiling IS NOT NULL
                                       THEN greatest(c.ceiling, 1) END)
            ELSE greatest(c.wanted, 0) END::integer AS desired_workers,
       c.ready::integer AS ready, c.in_flight::integer AS in_flight, c.oldest_ready_age,
       c.arrival_rate, c.handler_time, c.workers::integer AS workers,
       c.concurrency::integer AS concurrency, c.now AS at,
       c.rate_per_second, c.ceiling::integer AS ceiling,
       p.at AS pool_at, p.reason AS pool_reason
FROM capped AS c
LEFT JOIN {schema}.deadline_pools AS p
    ON p.queue = c.queue AND p.at >= c.now - 60
   AND EXISTS (SELECT 1 FROM {schema}.queues AS qu
               WHERE qu.name = c.queue AND qu.deadlines IS NOT NULL);
