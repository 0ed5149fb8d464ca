-- hailq schema version 12 (SQLite): settings read where they are applied (rule 39). The
-- effective retry policy (a JSON object, hailq/settings.py's RetryPolicy), dedup window
-- and largest body join the columns statements obey, so a send and a nack read them from
-- the queue's row, never from the copy a long-lived producer or consumer made. Filled
-- from what code declared with an operator's overrides laid over it.
ALTER TABLE hailq_queues ADD COLUMN retry TEXT;
ALTER TABLE hailq_queues ADD COLUMN dedup_window REAL NOT NULL DEFAULT 3600.0;
ALTER TABLE hailq_queues ADD COLUMN max_message_size INTEGER NOT NULL DEFAULT 1048576;
UPDATE hailq_queues SET
    retry = coalesce((SELECT json_extract(o.overrides, '$.retry') FROM hailq_queue_ops AS o
                      WHERE o.name = hailq_queues.name),
                     json_extract(settings, '$.retry')),
    dedup_window = coalesce((SELECT json_extract(o.overrides, '$.dedup_window')
                             FROM hailq_queue_ops AS o WHERE o.name = hailq_queues.name),
                            json_extract(settings, '$.dedup_window'), 3600.0),
    max_message_size = coalesce((SELECT json_extract(o.overrides, '$.max_message_size')
                                 FROM hailq_queue_ops AS o WHERE o.name = hailq_queues.name),
                                json_extract(settings, '$.max_message_size'), 1048576);
