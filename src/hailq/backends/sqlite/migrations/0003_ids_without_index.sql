-- Messages lose the unique index on `id`. Every claim's ack deleted an entry from it, one
-- more page per commit. Received messages and receipts carry the row's position (`seq`)
-- instead; ids stay unique because they are made from the time and 80 random bits.
-- SQLite cannot drop a column constraint, so the table is rebuilt.
ALTER TABLE hailq_messages RENAME TO hailq_messages_0002;

CREATE TABLE hailq_messages (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL,
    queue TEXT NOT NULL,
    state TEXT NOT NULL,
    body BLOB NOT NULL,
    body_kind INTEGER NOT NULL,
    headers TEXT,
    priority INTEGER NOT NULL,
    ordering_key TEXT,
    sort_key REAL NOT NULL,
    attempt INTEGER NOT NULL DEFAULT 0,
    enqueued_at REAL NOT NULL,
    available_at REAL NOT NULL,
    lease_until REAL,
    token TEXT,
    errors TEXT,
    dead_at REAL,
    parked INTEGER NOT NULL DEFAULT 0
);

INSERT INTO hailq_messages SELECT * FROM hailq_messages_0002;
DROP TABLE hailq_messages_0002;

-- The claim: one range seek in delivery order (rule 16).
CREATE INDEX hailq_messages_ready ON hailq_messages (queue, sort_key, seq) WHERE state = 'ready';
CREATE INDEX hailq_messages_scheduled ON hailq_messages (queue, available_at) WHERE state = 'scheduled';
CREATE INDEX hailq_messages_leased ON hailq_messages (queue, lease_until) WHERE state = 'leased';
CREATE INDEX hailq_messages_key ON hailq_messages (queue, ordering_key, seq) WHERE ordering_key IS NOT NULL;
CREATE INDEX hailq_messages_dead ON hailq_messages (queue, dead_at) WHERE state = 'dead';
