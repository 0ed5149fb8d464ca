-- hailq schema version 3 (PostgreSQL): what operators and schedulers keep in the broker's
-- database, apart from what code declares.
SELECT 1;
