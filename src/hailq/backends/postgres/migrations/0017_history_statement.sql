-- hailq schema version 17 (PostgreSQL): a retained ack's history rows written once per
-- statement, not once per row (rule 40). The row trigger of 0013_history.sql ran its
-- function, and the INSERT in it, for every retained row an ack deleted: ten times for
-- a batch of ten. This one runs once per DELETE on messages and writes the retained rows
-- of its transition table in one INSERT. What it costs others: every DELETE on messages
-- (a queue without history included) fills the transition table and calls the function,
-- which finds no retained row: measured in docs/guides/history-and-cancel.md.
DROP TRIGGER history_acked ON {schema}.messages;

CREATE OR REPLACE FUNCTION {schema}.history_acked() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {schema}.history (id, queue, outcome, dedup_id, ordering_key, headers,
                                  priority, body, body_kind, attempts, errors, consumer,
                                  enqueued_at, started_at, finished_at)
    SELECT id, queue, 'acked', dedup_id, ordering_key, headers, priority,
           CASE WHEN retain = 2 THEN body END, body_kind, attempt, errors, consumer,
           enqueued_at, claimed_at, {schema}.epoch()
    FROM gone WHERE retain > 0 AND state <> 'dead';
    RETURN NULL;
END $$;
CREATE TRIGGER history_acked AFTER DELETE ON {schema}.messages
REFERENCING OLD TABLE AS gone
FOR EACH STATEMENT EXECUTE FUNCTION {schema}.history_acked();
