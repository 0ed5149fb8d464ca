-- hailq schema version 6 (SQLite): the decisions of `hailq autoscale` (rule 24), one row
-- per tick of each autoscaler, with its reason and the saturation point it measured (the
-- cap of desired_workers). Kept an hour (autoscale_prune).
CREATE TABLE hailq_autoscale (
    seq INTEGER PRIMARY KEY,
    autoscaler TEXT NOT NULL,      -- host:pid:queue
    queue TEXT NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    at REAL NOT NULL,
    workers INTEGER NOT NULL,      -- processes it runs from this decision on
    desired INTEGER NOT NULL,      -- what the backlog asks, within its bounds
    decision TEXT NOT NULL,        -- grow, shrink or hold
    reason TEXT NOT NULL,
    ceiling INTEGER,               -- the measured saturation point, while it holds
    minimum INTEGER NOT NULL,
    maximum INTEGER NOT NULL,
    throughput REAL,               -- completions per second in its last window
    handler_time REAL              -- mean handler seconds in its last window
);
CREATE INDEX hailq_autoscale_queue ON hailq_autoscale (queue, at);
CREATE INDEX hailq_autoscale_at ON hailq_autoscale (at);
