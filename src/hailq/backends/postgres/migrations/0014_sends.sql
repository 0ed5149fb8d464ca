-- hailq schema version 10 (PostgreSQL): sends per priority per 10-second slot (rule 41):
-- the arrival rate of each priority that sizes a queue in deadline order. Counted by the
-- statement that inserts the messages, beside the queue's counters, in shards by backend
-- as the counters are (senders of one priority do not wait for each other's commits);
-- kept an hour and a minute, as the sketches are.
CREATE TABLE {schema}.sends (
    queue text NOT NULL,
    slot bigint NOT NULL,
    priority smallint NOT NULL,
    shard integer NOT NULL,
    sent bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, slot, priority, shard)
);
CREATE INDEX sends_slot ON {schema}.sends (slot);
