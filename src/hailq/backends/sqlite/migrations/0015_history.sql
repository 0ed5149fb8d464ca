-- hailq schema version 12 (SQLite): history of finished messages (rule 40). A queue
-- with ``retain`` keeps its acked, dead and cancelled messages, searchable, for that
-- long. Only messages claimed while their queue retained carry ``retain`` (1: without
-- the body, 2: with it), written by the claim itself: a queue without retention runs
-- the same statements as before and its acks write nothing more (the trigger's WHEN is
-- false). Dead and cancelled messages are recorded by the core (history_record).
ALTER TABLE hailq_messages ADD COLUMN retain INTEGER NOT NULL DEFAULT 0;
ALTER TABLE hailq_messages ADD COLUMN consumer TEXT;     -- who runs its current attempt
ALTER TABLE hailq_messages ADD COLUMN claimed_at REAL;   -- when its current attempt began
ALTER TABLE hailq_messages ADD COLUMN dedup_id TEXT;
ALTER TABLE hailq_queues ADD COLUMN retain REAL;         -- seconds; NULL: keep nothing
ALTER TABLE hailq_queues ADD COLUMN retain_bodies INTEGER NOT NULL DEFAULT 1;

CREATE TABLE hailq_history (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL,
    queue TEXT NOT NULL,
    outcome TEXT NOT NULL CHECK (outcome IN ('acked', 'dead', 'cancelled')),
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
CREATE INDEX hailq_history_id ON hailq_history (id);
CREATE INDEX hailq_history_queue ON hailq_history (queue, finished_at);
CREATE INDEX hailq_history_key ON hailq_history (ordering_key)
    WHERE ordering_key IS NOT NULL;
CREATE INDEX hailq_history_dedup ON hailq_history (dedup_id) WHERE dedup_id IS NOT NULL;

-- An ack deletes the row: a retained one is written to history first. BEFORE, reading
-- the row by its position: a trigger's program loads every OLD column it names for
-- every deleted row, marked or not, so this one names three (an AFTER trigger naming
-- each column cost every ack of every queue a copy of its body). hailq_now() is the
-- broker's clock, registered on each of hailq's connections like hailq_sort_key.
CREATE TRIGGER hailq_history_acked BEFORE DELETE ON hailq_messages
FOR EACH ROW WHEN OLD.retain > 0 AND OLD.state <> 'dead'
BEGIN
    INSERT INTO hailq_history (id, queue, outcome, dedup_id, ordering_key, headers,
                               priority, body, body_kind, attempts, errors, consumer,
                               enqueued_at, started_at, finished_at)
    SELECT id, queue, 'acked', dedup_id, ordering_key, headers, priority,
           CASE WHEN retain = 2 THEN body END, body_kind, attempt, errors, consumer,
           enqueued_at, claimed_at, hailq_now()
    FROM hailq_messages WHERE seq = OLD.seq;
END;
