-- hailq schema version 12 (SQLite): a retained ack writes its history row into a table
-- without secondary indexes, hailq_history_fresh; claim-time upkeep and the maintenance
-- service move its rows into hailq_history in bounded batches (history_settle), and
-- searches read both. Written one ack at a time, each history row dirtied three b-trees
-- (the table, its id index, its queue-and-time index), each a page more in every ack's
-- commit; moved a batch at a time, the pages are shared by hundreds of rows
-- (docs/guides/history-and-cancel.md#what-it-costs).
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

DROP TRIGGER hailq_history_acked;
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
