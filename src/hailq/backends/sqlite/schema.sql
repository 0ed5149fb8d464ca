-- index hailq_autoscale_at
CREATE INDEX hailq_autoscale_at ON hailq_autoscale (at);

-- index hailq_autoscale_queue
CREATE INDEX hailq_autoscale_queue ON hailq_autoscale (queue, at);

-- index hailq_dedup_expires
CREATE INDEX hailq_dedup_expires ON hailq_dedup (expires_at);

-- index hailq_history_dedup
CREATE INDEX hailq_history_dedup ON hailq_history (dedup_id) WHERE dedup_id IS NOT NULL;

-- index hailq_history_id
CREATE INDEX hailq_history_id ON hailq_history (id);

-- index hailq_history_key
CREATE INDEX hailq_history_key ON hailq_history (ordering_key)
    WHERE ordering_key IS NOT NULL;

-- index hailq_history_queue
CREATE INDEX hailq_history_queue ON hailq_history (queue, finished_at);

-- index hailq_levels_slot
CREATE INDEX hailq_levels_slot ON hailq_levels (slot);

-- index hailq_messages_dead
CREATE INDEX hailq_messages_dead ON hailq_messages (queue, dead_at) WHERE state = 'dead';

-- index hailq_messages_key
CREATE INDEX hailq_messages_key ON hailq_messages (queue, ordering_key, seq) WHERE ordering_key IS NOT NULL;

-- index hailq_messages_leased
CREATE INDEX hailq_messages_leased ON hailq_messages (queue, lease_until) WHERE state = 'leased';

-- index hailq_messages_ready
CREATE INDEX hailq_messages_ready ON hailq_messages (queue, sort_key, seq) WHERE state = 'ready';

-- index hailq_messages_scheduled
CREATE INDEX hailq_messages_scheduled ON hailq_messages (queue, available_at) WHERE state = 'scheduled';

-- index hailq_rates_slot
CREATE INDEX hailq_rates_slot ON hailq_rates (slot);

-- index hailq_samples_slot
CREATE INDEX hailq_samples_slot ON hailq_samples (slot);

-- index hailq_sends_slot
CREATE INDEX hailq_sends_slot ON hailq_sends (slot);

-- index hailq_sketch_ranges_slot
CREATE INDEX hailq_sketch_ranges_slot ON hailq_sketch_ranges (slot);

-- index hailq_sketches_slot
CREATE INDEX hailq_sketches_slot ON hailq_sketches (slot);

-- table hailq_autoscale
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

-- table hailq_counters
CREATE TABLE hailq_counters (
    queue TEXT PRIMARY KEY,
    sent INTEGER NOT NULL DEFAULT 0,
    purged INTEGER NOT NULL DEFAULT 0,
    nacked INTEGER NOT NULL DEFAULT 0,
    redelivered INTEGER NOT NULL DEFAULT 0,
    dead_lettered INTEGER NOT NULL DEFAULT 0,
    late_acks INTEGER NOT NULL DEFAULT 0
, acked INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID;

-- table hailq_dedup
CREATE TABLE hailq_dedup (
    queue TEXT NOT NULL,
    dedup_id TEXT NOT NULL,
    message_id TEXT NOT NULL,
    expires_at REAL NOT NULL,
    PRIMARY KEY (queue, dedup_id)
) WITHOUT ROWID;

-- table hailq_fence
CREATE TABLE hailq_fence (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    last INTEGER NOT NULL          -- the highest token handed out so far
);

-- table hailq_histograms
CREATE TABLE hailq_histograms (
    queue TEXT NOT NULL,
    kind TEXT NOT NULL,
    priority INTEGER NOT NULL,
    le REAL NOT NULL,
    n INTEGER NOT NULL DEFAULT 0,
    total REAL NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, kind, priority, le)
) WITHOUT ROWID;

-- table hailq_history
CREATE TABLE "hailq_history" (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL,
    queue TEXT NOT NULL,
    outcome TEXT NOT NULL
        CHECK (outcome = 'acked' OR outcome = 'dead' OR outcome = 'cancelled'),
    dedup_id TEXT,
    ordering_key TEXT,
    headers TEXT,
    priority INTEGER NOT NULL,
    body BLOB,                     -- NULL: the queue keeps no bodies (retain_bodies)
    body_kind INTEGER NOT NULL,
    attempts INTEGER NOT NULL,
    errors TEXT,                   -- each failed attempt: error, when, consumer, start
    consumer TEXT,                 -- who ran the last attempt
    enqueued_at REAL NOT NULL,
    started_at REAL,               -- when the last attempt began
    finished_at REAL NOT NULL
);

-- table hailq_history_fresh
CREATE TABLE hailq_history_fresh (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL,
    queue TEXT NOT NULL,
    outcome TEXT NOT NULL,         -- 'acked': dead and cancelled ones go to hailq_history
    dedup_id TEXT,
    ordering_key TEXT,
    headers TEXT,
    priority INTEGER NOT NULL,
    body BLOB,
    body_kind INTEGER NOT NULL,
    attempts INTEGER NOT NULL,
    errors TEXT,
    consumer TEXT,
    enqueued_at REAL NOT NULL,
    started_at REAL,
    finished_at REAL NOT NULL
);

-- table hailq_instance
CREATE TABLE hailq_instance (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    id TEXT NOT NULL
);

-- table hailq_levels
CREATE TABLE hailq_levels (
    queue TEXT NOT NULL,
    slot INTEGER NOT NULL,         -- floor(at / 10)
    at REAL NOT NULL,              -- when counted, on the broker's clock
    ready INTEGER NOT NULL,
    in_flight INTEGER NOT NULL,
    delayed INTEGER NOT NULL,
    blocked INTEGER NOT NULL,
    dead INTEGER NOT NULL,
    sent INTEGER NOT NULL,         -- the queue's sent counter then
    acked INTEGER,                 -- its acked count then; NULL when a count was capped
    capped INTEGER NOT NULL,       -- 1: some count stopped at the limit
    PRIMARY KEY (queue, slot)
) WITHOUT ROWID;

-- table hailq_maintenance
CREATE TABLE hailq_maintenance (
    duty TEXT PRIMARY KEY,
    next_due REAL NOT NULL,        -- the broker's clock: the next turn may be claimed then
    ran_at REAL NOT NULL,          -- when the last turn was claimed
    ran_by TEXT NOT NULL,          -- by whom (host:pid)
    runs INTEGER NOT NULL          -- turns claimed so far
) WITHOUT ROWID;

-- table hailq_messages
CREATE TABLE hailq_messages (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL,
    queue TEXT NOT NULL,
    state TEXT NOT NULL,
    body BLOB NOT NULL,
    body_kind INTEGER NOT NULL,
    headers TEXT,
    priority INTEGER NOT NULL,
    ordering_key TEXT,
    sort_key REAL NOT NULL,
    attempt INTEGER NOT NULL DEFAULT 0,
    enqueued_at REAL NOT NULL,
    available_at REAL NOT NULL,
    lease_until REAL,
    token TEXT,
    errors TEXT,
    dead_at REAL,
    parked INTEGER NOT NULL DEFAULT 0
, cancelled_at REAL, retain INTEGER NOT NULL DEFAULT 0, consumer TEXT, claimed_at REAL, dedup_id TEXT);

-- table hailq_queue_ops
CREATE TABLE hailq_queue_ops (
    name TEXT PRIMARY KEY,
    paused INTEGER NOT NULL DEFAULT 0,
    overrides TEXT,
    updated_at REAL NOT NULL
) WITHOUT ROWID;

-- table hailq_queues
CREATE TABLE hailq_queues (
    name TEXT PRIMARY KEY,
    settings TEXT NOT NULL,
    created_at REAL NOT NULL
, lease REAL NOT NULL DEFAULT 30.0, max_attempts INTEGER NOT NULL DEFAULT 5, max_in_flight INTEGER, aging REAL, park INTEGER NOT NULL DEFAULT 0, rate_per_second REAL, burst REAL, deadlines TEXT, retry TEXT, dedup_window REAL NOT NULL DEFAULT 3600.0, max_message_size INTEGER NOT NULL DEFAULT 1048576, retain REAL, retain_bodies INTEGER NOT NULL DEFAULT 1);

-- table hailq_rate_buckets
CREATE TABLE hailq_rate_buckets (
    queue TEXT PRIMARY KEY,
    tokens REAL NOT NULL,          -- tokens left as of refilled_at
    refilled_at REAL NOT NULL,
    taken INTEGER NOT NULL DEFAULT 0  -- what the last claim took (its statement returns it)
) WITHOUT ROWID;

-- table hailq_rates
CREATE TABLE hailq_rates (
    queue TEXT NOT NULL,
    slot INTEGER NOT NULL,
    priority INTEGER NOT NULL,
    started INTEGER NOT NULL DEFAULT 0,
    acked INTEGER NOT NULL DEFAULT 0,
    failed INTEGER NOT NULL DEFAULT 0,
    breaches INTEGER NOT NULL DEFAULT 0,
    handler_total REAL NOT NULL DEFAULT 0, redelivered INTEGER NOT NULL DEFAULT 0, inbox INTEGER NOT NULL DEFAULT 0, late_acks INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, slot, priority)
) WITHOUT ROWID;

-- table hailq_samples
CREATE TABLE hailq_samples (
    queue TEXT NOT NULL,
    slot INTEGER NOT NULL,
    at REAL NOT NULL,
    sent INTEGER NOT NULL,
    dead_lettered INTEGER NOT NULL, acked INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, slot)
) WITHOUT ROWID;

-- table hailq_schedules
CREATE TABLE hailq_schedules (
    name TEXT PRIMARY KEY,
    queue TEXT NOT NULL,
    cron TEXT,                     -- a cron expression, or NULL with every
    every REAL,                    -- seconds between slots, or NULL with cron
    timezone TEXT NOT NULL DEFAULT 'UTC',
    catch_up INTEGER NOT NULL DEFAULT 0,
    body BLOB NOT NULL,
    body_kind INTEGER NOT NULL,
    headers TEXT,
    priority INTEGER NOT NULL DEFAULT 0,
    source TEXT NOT NULL,          -- 'app' (app.periodic) or 'broker' (broker.schedule)
    paused INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL,
    declared_at REAL NOT NULL,     -- last time a running scheduler declared it
    last_slot REAL NOT NULL,       -- the last slot sent (its creation time at first)
    fired_at REAL,
    fired INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

-- table hailq_schema
CREATE TABLE hailq_schema (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL);

-- table hailq_sends
CREATE TABLE hailq_sends (
    queue TEXT NOT NULL,
    slot INTEGER NOT NULL,         -- epoch seconds / 10
    priority INTEGER NOT NULL,
    sent INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, slot, priority)
) WITHOUT ROWID;

-- table hailq_sketch_ranges
CREATE TABLE hailq_sketch_ranges (
    queue TEXT NOT NULL,
    kind TEXT NOT NULL,
    priority INTEGER NOT NULL,
    slot INTEGER NOT NULL,
    n INTEGER NOT NULL DEFAULT 0,
    total REAL NOT NULL DEFAULT 0,
    lo REAL NOT NULL,              -- the smallest value of the slot
    hi REAL NOT NULL,              -- the largest
    PRIMARY KEY (queue, kind, priority, slot)
) WITHOUT ROWID;

-- table hailq_sketches
CREATE TABLE hailq_sketches (
    queue TEXT NOT NULL,
    kind TEXT NOT NULL,            -- wait or handler
    priority INTEGER NOT NULL,
    slot INTEGER NOT NULL,         -- epoch seconds / 10
    bucket INTEGER NOT NULL,       -- hailq/observe/sketch.py
    n INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, kind, priority, slot, bucket)
) WITHOUT ROWID;

-- table hailq_subscriptions
CREATE TABLE hailq_subscriptions (
    topic TEXT NOT NULL,
    queue TEXT NOT NULL,
    filter TEXT,
    created_at REAL NOT NULL,
    PRIMARY KEY (topic, queue)
);

-- table hailq_topics
CREATE TABLE hailq_topics (
    name TEXT PRIMARY KEY,
    created_at REAL NOT NULL
);

-- table hailq_workers
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
, running TEXT NOT NULL DEFAULT '[]');

-- trigger hailq_history_acked
CREATE TRIGGER hailq_history_acked BEFORE DELETE ON hailq_messages
FOR EACH ROW WHEN OLD.retain > 0 AND OLD.state <> 'dead'
BEGIN
    INSERT INTO hailq_history_fresh (id, queue, outcome, dedup_id, ordering_key, headers,
                                     priority, body, body_kind, attempts, errors,
                                     consumer, enqueued_at, started_at, finished_at)
    SELECT id, queue, 'acked', dedup_id, ordering_key, headers, priority,
           CASE WHEN retain = 2 THEN body END, body_kind, attempt, errors, consumer,
           enqueued_at, claimed_at, hailq_now()
    FROM hailq_messages WHERE seq = OLD.seq;
END;

