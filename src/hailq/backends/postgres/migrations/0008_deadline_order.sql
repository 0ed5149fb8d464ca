-- hailq schema version 8 (PostgreSQL): deadline order (rule 41). A queue in deadline
-- order holds every priority's service-level target (a JSON array indexed by priority,
-- from hailq/policy/deadlines.py), so the nack, lease expiry, redrive and re-sort
-- statements give a message the sort key available_at + target where they run; NULL:
-- priority order (rule 16, strict or aged).
ALTER TABLE {schema}.queues ADD COLUMN deadlines jsonb;

-- Rules 16 and 41's delivery order, defined once: smaller keys first, ties by seq. With a
-- target (deadline order) the message's deadline; else strict priority without aging,
-- and with aging A seconds per level available_at - priority * A
-- (hailq/policy/ordering.py says the same in Python). It replaces migration 2's.
CREATE FUNCTION {schema}.sort_key(priority integer, available_at double precision,
                                  aging double precision, target double precision)
RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS 'SELECT CASE WHEN target IS NOT NULL THEN available_at + target
                WHEN aging IS NULL THEN -priority::double precision
                ELSE available_at - priority * aging END';
DROP FUNCTION {schema}.sort_key(integer, double precision, double precision);
