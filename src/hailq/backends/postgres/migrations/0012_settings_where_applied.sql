-- hailq schema version 10 (PostgreSQL): settings read where they are applied (rule 39).
-- The effective retry policy (hailq/settings.py's RetryPolicy as JSON), dedup window and
-- largest body join the columns statements obey, so a send and a nack read them from the
-- queue's row, never from the copy a long-lived producer or consumer made. Filled from
-- what code declared with an operator's overrides laid over it.
ALTER TABLE {schema}.queues ADD COLUMN retry jsonb,
    ADD COLUMN dedup_window double precision NOT NULL DEFAULT 3600,
    ADD COLUMN max_message_size integer NOT NULL DEFAULT 1048576;
UPDATE {schema}.queues AS q SET
    retry = coalesce(o.overrides::jsonb -> 'retry', q.settings::jsonb -> 'retry'),
    dedup_window = coalesce((o.overrides::jsonb ->> 'dedup_window')::float8,
                            (q.settings::jsonb ->> 'dedup_window')::float8, 3600),
    max_message_size = coalesce((o.overrides::jsonb ->> 'max_message_size')::integer,
                                (q.settings::jsonb ->> 'max_message_size')::integer, 1048576)
FROM {schema}.queues AS d LEFT JOIN {schema}.queue_ops AS o ON o.name = d.name
WHERE d.name = q.name;

-- The retry backoff of a failed attempt, as hailq/policy/retry.py computes it: base *
-- factor^(attempt - 1), at most max, less a random share (jitter) of it. Worked out in
-- logarithms so that a large factor and attempt never overflow. NULL: the defaults.
CREATE FUNCTION {schema}.backoff(retry jsonb, attempt integer) RETURNS double precision
LANGUAGE sql VOLATILE PARALLEL SAFE
AS $$
SELECT CASE WHEN p.base <= 0 THEN 0.0
            ELSE least(p.max, p.base * exp(least(ln(p.factor) * greatest(attempt - 1, 0),
                                                  ln(p.max / p.base) + 1.0)))
       END * (1.0 - p.jitter * random())
FROM (SELECT coalesce((retry ->> 'base')::float8, 1.0) AS base,
             coalesce((retry ->> 'factor')::float8, 2.0) AS factor,
             coalesce((retry ->> 'max')::float8, 300.0) AS max,
             coalesce((retry ->> 'jitter')::float8, 0.1) AS jitter) AS p
$$;
