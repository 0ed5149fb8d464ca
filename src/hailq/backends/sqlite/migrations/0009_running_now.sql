-- hailq schema version 9 (SQLite): what each worker's slots run now (issue "Operate it
-- like the best job dashboards"): the registry's report carries the messages in its
-- slots as JSON [[id, queue, attempt, seconds running], ...].
ALTER TABLE hailq_workers ADD COLUMN running TEXT NOT NULL DEFAULT '[]';
