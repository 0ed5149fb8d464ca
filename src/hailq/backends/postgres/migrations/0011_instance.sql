-- hailq schema version 10 (PostgreSQL): the schema's instance id (rule 38). One row, a
-- random id made here: a send that joins a caller's transaction (connection=) reads it
-- through the caller's connection and compares it with the broker's own, so a connection
-- to another database or server, hailq's or not, is refused before anything is written.
CREATE TABLE {schema}.instance (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    id text NOT NULL
);
INSERT INTO {schema}.instance (id) VALUES (md5(random()::text || clock_timestamp()::text));
