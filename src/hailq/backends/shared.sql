-- SQL both dialects write alike, as parts their queries.sql use (hailq/backends/sqlfile.py):
-- each is written once here, never in a dialect's file.

-- part: lease_end_state
-- What an ended lease leaves its message as (leases_expire, rules 13 and 40): given
-- back, dead after its last attempt, or cancelled, as of the lease's end.
SET state = CASE WHEN cancelled_at IS NOT NULL THEN 'cancelled'
                 WHEN attempt >= q.max_attempts THEN 'dead' ELSE 'ready' END,
    dead_at = CASE WHEN cancelled_at IS NULL AND attempt >= q.max_attempts
                   THEN lease_until END,
    available_at = lease_until

-- part: queue_columns_update
-- A queue declared again (queue_save): its settings and the columns statements obey.
ON CONFLICT (name) DO UPDATE SET settings = excluded.settings, lease = excluded.lease,
    max_attempts = excluded.max_attempts, max_in_flight = excluded.max_in_flight,
    aging = excluded.aging, park = excluded.park, deadlines = excluded.deadlines,
    retry = excluded.retry, dedup_window = excluded.dedup_window,
    max_message_size = excluded.max_message_size,
    retain = excluded.retain, retain_bodies = excluded.retain_bodies
