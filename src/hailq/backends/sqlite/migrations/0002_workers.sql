-- The worker registry: each worker process reports itself every few seconds.
CREATE TABLE hailq_workers (
    id TEXT PRIMARY KEY,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    queues TEXT NOT NULL,
    concurrency INTEGER NOT NULL,
    in_flight INTEGER NOT NULL,
    started_at REAL NOT NULL,
    last_seen REAL NOT NULL,
    state TEXT NOT NULL
);
