-- hailq schema version 1 (PostgreSQL). {schema} is hailq's own schema.
-- States: see hailq/models.py. Times are epoch seconds on the database clock.
-- The one clock of rule 11: the database's, as epoch seconds.
CREATE FUNCTION {schema}.epoch() RETURNS double precision
LANGUAGE sql STABLE PARALLEL SAFE AS 'SELECT extract(epoch from now())::double precision';

CREATE TABLE {schema}.queues (
    name text PRIMARY KEY,
    settings text NOT NULL,
    created_at double precision NOT NULL
);

CREATE TABLE {schema}.messages (
    seq bigint GENERATED ALWAYS AS IDENTITY,
    id text PRIMARY KEY,
    queue text NOT NULL,
    state text NOT NULL,
    body bytea NOT NULL,
    body_kind smallint NOT NULL,
    headers text,
    priority smallint NOT NULL,
    ordering_key text,
    sort_key double precision NOT NULL,
    attempt integer NOT NULL DEFAULT 0,
    enqueued_at double precision NOT NULL,
    available_at double precision NOT NULL,
    lease_until double precision,
    token text,
    errors jsonb,
    dead_at double precision,
    parked boolean NOT NULL DEFAULT false
);

-- The claim: one range seek in delivery order (rule 16).
CREATE INDEX messages_ready ON {schema}.messages (queue, sort_key, seq) WHERE state = 'ready';
CREATE INDEX messages_scheduled ON {schema}.messages (queue, available_at) WHERE state = 'scheduled';
CREATE INDEX messages_leased ON {schema}.messages (queue, lease_until) WHERE state = 'leased';
CREATE INDEX messages_key ON {schema}.messages (queue, ordering_key, seq) WHERE ordering_key IS NOT NULL;
CREATE INDEX messages_dead ON {schema}.messages (queue, dead_at) WHERE state = 'dead';

CREATE TABLE {schema}.dedup (
    queue text NOT NULL,
    dedup_id text NOT NULL,
    message_id text NOT NULL,
    expires_at double precision NOT NULL,
    PRIMARY KEY (queue, dedup_id)
);
CREATE INDEX dedup_expires ON {schema}.dedup (expires_at);

-- Counters are spread over shards (by backend pid) so concurrent writers do not queue on one row.
-- Acked is not stored: every sent message is still present, purged, or acked, so
-- acked = sent - present - purged, exact and free on the hot path.
CREATE TABLE {schema}.counters (
    queue text NOT NULL,
    shard integer NOT NULL,
    sent bigint NOT NULL DEFAULT 0,
    purged bigint NOT NULL DEFAULT 0,
    nacked bigint NOT NULL DEFAULT 0,
    redelivered bigint NOT NULL DEFAULT 0,
    dead_lettered bigint NOT NULL DEFAULT 0,
    late_acks bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, shard)
);

CREATE TABLE {schema}.topics (
    name text PRIMARY KEY,
    created_at double precision NOT NULL
);

CREATE TABLE {schema}.subscriptions (
    topic text NOT NULL,
    queue text NOT NULL,
    filter text,
    created_at double precision NOT NULL,
    PRIMARY KEY (topic, queue)
);

CREATE TABLE {schema}.workers (
    id text PRIMARY KEY,
    host text NOT NULL,
    pid integer NOT NULL,
    queues text NOT NULL,
    concurrency integer NOT NULL,
    in_flight integer NOT NULL,
    started_at double precision NOT NULL,
    last_seen double precision NOT NULL,
    state text NOT NULL
);

-- Wake receivers waiting in LISTEN when messages arrive, whoever inserted them
-- (including a caller's own transaction, rule 3).
CREATE FUNCTION {schema}.notify_insert() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    q text;
BEGIN
    FOR q IN SELECT DISTINCT queue FROM new_rows WHERE state = 'ready' LOOP
        PERFORM pg_notify(TG_ARGV[0], q);
    END LOOP;
    RETURN NULL;
END
$$;

CREATE TRIGGER messages_notify AFTER INSERT ON {schema}.messages
REFERENCING NEW TABLE AS new_rows
FOR EACH STATEMENT EXECUTE FUNCTION {schema}.notify_insert({channel});
