-- hailq schema version 7 (PostgreSQL): what each worker's slots run now: the registry's
-- report carries the messages in its slots as JSON [[id, queue, attempt, seconds
-- running], ...].
ALTER TABLE {schema}.workers ADD COLUMN running text NOT NULL DEFAULT '[]';
