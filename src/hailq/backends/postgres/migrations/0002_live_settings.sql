-- hailq schema version 2 (PostgreSQL). The settings a statement obeys, as columns beside
-- the settings' JSON: the claim, the upkeep and the nack read them where they run, so an
-- operator's change reaches running consumers without a restart. Rule 16's sort key as
-- a function. And NOTIFY only when a receiver waits.
ALTER TABLE {schema}.queues
    ADD COLUMN lease double precision NOT NULL DEFAULT 30,
    ADD COLUMN max_attempts integer NOT NULL DEFAULT 5,
    ADD COLUMN max_in_flight integer,
    ADD COLUMN aging double precision,
    ADD COLUMN park boolean NOT NULL DEFAULT false;
UPDATE {schema}.queues SET
    lease = coalesce((settings::jsonb ->> 'lease')::float8, 30),
    max_attempts = coalesce((settings::jsonb ->> 'max_attempts')::integer, 5),
    max_in_flight = (settings::jsonb ->> 'max_in_flight')::integer,
    aging = (settings::jsonb ->> 'aging')::float8,
    park = coalesce(settings::jsonb ->> 'on_dead' = 'park', false);

-- Rule 16's delivery order, defined once: smaller keys first, ties by seq. Strict
-- priority without aging; with aging A seconds per level, old low-priority work never
-- starves (hailq/policy/ordering.py says the same in Python).
CREATE FUNCTION {schema}.sort_key(priority integer, available_at double precision,
                                  aging double precision) RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS 'SELECT CASE WHEN aging IS NULL THEN -priority::double precision
                ELSE available_at - priority * aging END';

-- NOTIFY only when a receiver waits. Version 1 notified on every insert of a ready
-- message (a trigger): one pg_notify per send, whether or not anybody listened. Now a
-- receiver about to sleep registers in waiters (per queue, until a deadline a little past
-- its longest wait), and the send's statement calls wake(), which notifies only if a
-- registration is current.
--
-- No wake-up is lost: wake() takes a shared advisory lock on the queue before it looks
-- (with a snapshot of its own, taken after the lock: each query of a VOLATILE function
-- takes one) and keeps it until the send commits; wait_begin() registers and tries the
-- same lock exclusively, then looks for a ready message. A send that looked before the
-- registration was visible held its lock already, so the waiter either waited for its
-- commit (and then sees its message) or could not take the lock and looks again soon.
CREATE TABLE {schema}.waiters (
    queue text NOT NULL,
    waiter text NOT NULL,
    until double precision NOT NULL,
    PRIMARY KEY (queue, waiter)
);

CREATE FUNCTION {schema}.wake(q text, channel text) RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(hashtextextended('hailq wake ' || q, 0));
    IF EXISTS (SELECT 1 FROM {schema}.waiters w
               WHERE w.queue = q AND w.until > extract(epoch from clock_timestamp())) THEN
        PERFORM pg_notify(channel, q);
    END IF;
END
$$;

-- Register who waits for queues until now + seconds. 0: sleep; 1: a message is ready;
-- 2: a send is between its look and its commit (its lock is held): look again soon.
CREATE FUNCTION {schema}.wait_begin(qs text[], who text, seconds double precision)
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
    IF EXISTS (SELECT 1 FROM {schema}.messages WHERE queue = ANY(qs) AND state = 'ready') THEN
        RETURN 1;
    END IF;
    RETURN CASE WHEN busy THEN 2 ELSE 0 END;
END
$$;

DROP TRIGGER messages_notify ON {schema}.messages;
DROP FUNCTION {schema}.notify_insert();
