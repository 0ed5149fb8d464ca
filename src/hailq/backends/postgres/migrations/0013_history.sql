-- hailq schema version 10 (PostgreSQL): history of finished messages (rule 40). A queue
-- with ``retain`` keeps its acked, dead and cancelled messages, searchable, for that
-- long. Only messages claimed while their queue retained carry ``retain`` (1: without
-- the body, 2: with it), written by the claim itself: a queue without retention runs
-- the same statements as before and its acks write nothing more (the trigger's WHEN is
-- false). Dead and cancelled messages are recorded by the core (history_record).
ALTER TABLE {schema}.messages ADD COLUMN retain smallint NOT NULL DEFAULT 0,
    ADD COLUMN consumer text, ADD COLUMN claimed_at double precision,
    ADD COLUMN dedup_id text;
ALTER TABLE {schema}.queues ADD COLUMN retain double precision,
    ADD COLUMN retain_bodies boolean NOT NULL DEFAULT true;

CREATE TABLE {schema}.history (
    seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id text NOT NULL,
    queue text NOT NULL,
    outcome text NOT NULL CHECK (outcome IN ('acked', 'dead', 'cancelled')),
    dedup_id text,
    ordering_key text,
    headers text,
    priority smallint NOT NULL,
    body bytea,                    -- NULL: the queue keeps no bodies (retain_bodies)
    body_kind smallint NOT NULL,
    attempts integer NOT NULL,
    errors jsonb,                  -- each failed attempt: error, when, consumer, start
    consumer text,                 -- who ran the last attempt
    enqueued_at double precision NOT NULL,
    started_at double precision,   -- when the last attempt began
    finished_at double precision NOT NULL
);
CREATE INDEX history_id ON {schema}.history (id);
CREATE INDEX history_queue ON {schema}.history (queue, finished_at);
CREATE INDEX history_key ON {schema}.history (ordering_key) WHERE ordering_key IS NOT NULL;
CREATE INDEX history_dedup ON {schema}.history (dedup_id) WHERE dedup_id IS NOT NULL;

-- An ack deletes the row: a retained one is written to history first.
CREATE FUNCTION {schema}.history_acked() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {schema}.history (id, queue, outcome, dedup_id, ordering_key, headers,
                                  priority, body, body_kind, attempts, errors, consumer,
                                  enqueued_at, started_at, finished_at)
    VALUES (OLD.id, OLD.queue, 'acked', OLD.dedup_id, OLD.ordering_key, OLD.headers,
            OLD.priority, CASE WHEN OLD.retain = 2 THEN OLD.body END, OLD.body_kind,
            OLD.attempt, OLD.errors, OLD.consumer, OLD.enqueued_at, OLD.claimed_at,
            {schema}.epoch());
    RETURN NULL;
END $$;
CREATE TRIGGER history_acked AFTER DELETE ON {schema}.messages
FOR EACH ROW WHEN (OLD.retain > 0 AND OLD.state <> 'dead')
EXECUTE FUNCTION {schema}.history_acked();
