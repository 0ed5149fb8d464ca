-- hailq schema version 17 (PostgreSQL): a retained ack's history row is written by the
-- ack statement itself (rule 40), not by a trigger. The row trigger of 0013_history.sql
-- ran its PL/pgSQL function, and the INSERT in it, once per retained row an ack deleted.
-- Each ack statement of queries.sql (message_ack, message_ack_one, ack_plain_steps, so
-- message_ack_plain and message_ack_claim) now returns the deleted rows' columns and
-- inserts the retained ones into history in a data-modifying CTE (history_kept): one
-- INSERT per statement, over no row for a queue without retention. Other deletions
-- (a purge, a queue's deletion) write nothing; dead and cancelled messages are recorded
-- by the core (history_record), which clears their mark first.
DROP TRIGGER history_acked ON {schema}.messages;
DROP FUNCTION {schema}.history_acked();
