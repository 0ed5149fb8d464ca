-- hailq schema version 12 (SQLite): sends per priority per 10-second slot (rule 41): the
-- arrival rate of each priority that sizes a queue in deadline order. Counted by the
-- send's own transaction, beside its count of the queue's sends (count_sent); kept an
-- hour and a minute, as the sketches are.
CREATE TABLE hailq_sends (
    queue TEXT NOT NULL,
    slot INTEGER NOT NULL,         -- epoch seconds / 10
    priority INTEGER NOT NULL,
    sent INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, slot, priority)
) WITHOUT ROWID;
CREATE INDEX hailq_sends_slot ON hailq_sends (slot);
