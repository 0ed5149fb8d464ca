-- hailq schema version 9 (PostgreSQL): fencing tokens (rule 41). One sequence for the
-- schema: every claim statement draws a value for each row it leases (nextval in the
-- claim's RETURNING), so a lease's token is higher than that of every lease that
-- committed before it. Nothing resets it: not a redrive, not a purge, not a queue's
-- deletion. No cache: values are handed out in the order they are drawn.
CREATE SEQUENCE {schema}.fence AS bigint MINVALUE 1 NO CYCLE;
