-- hailq schema version 7 (PostgreSQL): reserved. Another branch adds its migration with
-- this number; this placeholder keeps the numbering 1..n on the deadline branch until the
-- merge replaces it.
SELECT 1;
