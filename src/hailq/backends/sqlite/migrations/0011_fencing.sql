-- hailq schema version 11 (SQLite): fencing tokens (rule 41). One counter for the whole
-- database: each claim adds the number of messages it leased, in its write transaction,
-- and hands them the numbers it skipped over, in claim order (fence_take). Nothing
-- resets it: not a redrive, not a purge, not a queue's deletion.
CREATE TABLE hailq_fence (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    last INTEGER NOT NULL          -- the highest token handed out so far
);
INSERT INTO hailq_fence (one, last) VALUES (1, 0);
