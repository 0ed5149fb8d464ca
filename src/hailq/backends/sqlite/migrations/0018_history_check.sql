-- hailq schema version 12 (SQLite): history's outcome check written as three comparisons.
-- SQLite evaluated ``outcome IN ('acked', 'dead', 'cancelled')`` by building a temporary
-- b-tree of the three values for every row inserted: about half of what writing a
-- retained ack's history row cost (callgrind, docs/guides/history-and-cancel.md). SQLite
-- cannot alter a CHECK, so the table is rebuilt: a new one, the rows copied, the old one
-- dropped (its indexes with it), the new one renamed. With legacy_alter_table the rename
-- does not check the trigger that writes into the table (0015_history.sql), which names
-- it and fails to parse while the table is gone: the trigger stays as it is.
PRAGMA legacy_alter_table = ON;
CREATE TABLE hailq_history_0018 (
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
INSERT INTO hailq_history_0018 SELECT * FROM hailq_history;
DROP TABLE hailq_history;
ALTER TABLE hailq_history_0018 RENAME TO hailq_history;
PRAGMA legacy_alter_table = OFF;

CREATE INDEX hailq_history_id ON hailq_history (id);
CREATE INDEX hailq_history_queue ON hailq_history (queue, finished_at);
CREATE INDEX hailq_history_key ON hailq_history (ordering_key)
    WHERE ordering_key IS NOT NULL;
CREATE INDEX hailq_history_dedup ON hailq_history (dedup_id) WHERE dedup_id IS NOT NULL;
