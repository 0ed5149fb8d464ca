-- hailq schema version 12 (SQLite): the database's instance id (rule 38). One row, a
-- random id made here: a send that joins a caller's transaction (connection=) reads it
-- through the caller's connection and compares it with the broker's own, so a connection
-- to any other database, hailq's or not, is refused before anything is written.
CREATE TABLE hailq_instance (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    id TEXT NOT NULL
);
INSERT INTO hailq_instance (one, id) VALUES (1, lower(hex(randomblob(16))));
