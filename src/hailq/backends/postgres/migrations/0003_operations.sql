-- hailq schema version 3 (PostgreSQL): what operators and schedulers keep in the broker's
-- database, apart from what code declares.
SELECT 1;

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
