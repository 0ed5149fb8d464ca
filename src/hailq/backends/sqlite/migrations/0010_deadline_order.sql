-- hailq schema version 10 (SQLite): deadline order (rule 41). A queue in deadline order
-- holds every priority's service-level target (a JSON array indexed by priority, from
-- hailq/policy/deadlines.py), so the nack, lease expiry, redrive and re-sort statements
-- give a message the sort key available_at + target where they run; NULL: priority
-- order (rule 16, strict or aged).
ALTER TABLE hailq_queues ADD COLUMN deadlines TEXT;
