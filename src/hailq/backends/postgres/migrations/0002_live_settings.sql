-- hailq schema version 2 (PostgreSQL). The settings a statement obeys, as columns beside
-- the settings' JSON: the claim, the upkeep and the nack read them where they run, so an
-- operator's change reaches running consumers without a restart.
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
