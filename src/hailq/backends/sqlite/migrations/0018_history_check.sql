-- hailq schema version 12 (SQLite): history's outcome check written as three comparisons.
-- SQLite evaluated ``outcome IN ('acked', 'dead', 'cancelled')`` by building a temporary
-- b-tree of the three values for every row inserted: about half of what writing a
-- retained ack's history row cost (callgrind, docs/guides/history-and-cancel.md). SQLite
-- cannot alter a CHECK, so the table is rebuilt; the trigger that writes into it goes
-- first (a rename would rewrite it to name the old table) and comes back unchanged.
DROP TRIGGER hailq_history_acked;
ALTER TABLE hailq_history RENAME TO hailq_history_0017;

CREATE TABLE hailq_history (
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
INSERT INTO hailq_history SELECT * FROM hailq_history_0017;
DROP TABLE hailq_history_0017;

CREATE INDEX hailq_history_id ON hailq_history (id);
CREATE INDEX hailq_history_queue ON hailq_history (queue, finished_at);
CREATE INDEX hailq_history_key ON hailq_history (ordering_key)
    WHERE ordering_key IS NOT NULL;
CREATE INDEX hailq_history_dedup ON hailq_history (dedup_id) WHERE dedup_id IS NOT NULL;

-- As in 0015_history.sql.
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
