-- hailq queries for PostgreSQL. {schema} is hailq's schema; parameters are %(name)s.
-- Times are epoch seconds from {schema}.epoch(), the database clock (rule 11).
-- {channel} is the schema's LISTEN/NOTIFY channel. {relaxed} marks the leases' and acks'
-- statements: a condition that is always true and sets synchronous_commit = off for the statement's own transaction (a crash that loses
-- one only causes a redelivery). Set per transaction, never per session, so no setting
-- stays on a connection that a transaction pooler hands to a send next. The variant
-- that commits a caller's effect with its ack renders it as plain true.
-- Plans: statements run prepared, and PostgreSQL keeps a generic plan only if it costs
-- no more than the plans for each call's values. So a claim's {limit} is written into
-- its text (a LIMIT parameter reads as a tenth of the table), and batches pass their
-- arrays as (SELECT %(x)s) (an array parameter reads as ten rows): otherwise these
-- statements were planned anew on every call once the table was analyzed.

-- name: queue_save
INSERT INTO {schema}.queues (name, settings, created_at, lease, max_attempts, max_in_flight,
                             aging, park, deadlines, retry, dedup_window, max_message_size,
                             retain, retain_bodies)
VALUES (%(name)s, %(settings)s, {schema}.epoch(), %(lease)s, %(max_attempts)s,
        %(max_in_flight)s, %(aging)s, %(park)s, %(deadlines)s::jsonb, %(retry)s::jsonb,
        %(dedup_window)s, %(max_message_size)s, %(retain)s, %(retain_bodies)s)
{queue_columns_update};

-- name: queue_resort
-- A queue's aging, order or targets changed (its columns hold the new ones already): give
-- its live messages the keys they would have had under the new setting (rules 16, 41),
-- so old and new messages are ordered alike. Dead ones get theirs when redriven.
UPDATE {schema}.messages AS m
SET sort_key = {schema}.sort_key(m.priority, m.available_at, q.aging,
                                 (q.deadlines ->> m.priority)::float8)
FROM {schema}.queues AS q
WHERE q.name = %(queue)s AND m.queue = %(queue)s AND m.state <> 'dead';

-- name: queue_get
SELECT settings FROM {schema}.queues WHERE name = %(name)s;

-- name: queue_live
-- What a claim obeys, the pause included; no row: the queue does not exist (deleted).
SELECT q.lease, q.max_in_flight, q.max_attempts, q.park, coalesce(o.paused, false),
       q.max_message_size, q.retain, q.retain_bodies
FROM {schema}.queues AS q LEFT JOIN {schema}.queue_ops AS o ON o.name = q.name
WHERE q.name = %(queue)s;

-- name: queue_describe
-- Declared settings, operator overrides and pause of the queues in %(names)s, or of every
-- queue with %(all)s.
SELECT q.name, q.settings, o.overrides, coalesce(o.paused, false)
FROM {schema}.queues AS q LEFT JOIN {schema}.queue_ops AS o ON o.name = q.name
WHERE %(all)s OR q.name = ANY(%(names)s::text[])
ORDER BY q.name;

-- name: queue_lock
-- PostgreSQL only (SQLite has one writer at a time): a declaration and an operator's
-- change of one queue take turns, so neither computes its settings from overrides the
-- other is about to change.
SELECT pg_advisory_xact_lock(hashtextextended('hailq queue ' || %(name)s, 0));

-- name: queue_ops_get
SELECT overrides, paused FROM {schema}.queue_ops WHERE name = %(name)s;

-- name: queue_apply
-- The effective settings (declared overlaid by overrides) into the columns statements read.
UPDATE {schema}.queues SET lease = %(lease)s, max_attempts = %(max_attempts)s,
    max_in_flight = %(max_in_flight)s, aging = %(aging)s, park = %(park)s,
    deadlines = %(deadlines)s::jsonb, retry = %(retry)s::jsonb,
    dedup_window = %(dedup_window)s, max_message_size = %(max_message_size)s,
    retain = %(retain)s, retain_bodies = %(retain_bodies)s
WHERE name = %(name)s;

-- name: queue_override
INSERT INTO {schema}.queue_ops (name, overrides, updated_at)
VALUES (%(name)s, %(overrides)s, {schema}.epoch())
ON CONFLICT (name) DO UPDATE SET overrides = excluded.overrides,
    updated_at = excluded.updated_at;

-- name: queue_pause
-- A resume wakes the queue's waiting receivers.
WITH saved AS (
    INSERT INTO {schema}.queue_ops (name, paused, updated_at)
    VALUES (%(name)s, %(paused)s, {schema}.epoch())
    ON CONFLICT (name) DO UPDATE SET paused = excluded.paused, updated_at = excluded.updated_at
    RETURNING paused
)
SELECT pg_notify({channel}, %(name)s) FROM saved WHERE NOT paused;

-- name: queue_messages_count
SELECT count(*) FROM {schema}.messages WHERE queue = %(queue)s;

-- name: queue_delete_messages
DELETE FROM {schema}.messages WHERE queue = %(queue)s;

-- name: queue_delete_dedup
-- With queue_delete_counters, _ops and _subscriptions: everything else a queue owns goes
-- with it (a subscription it is stops receiving copies; declared again, it starts anew).
DELETE FROM {schema}.dedup WHERE queue = %(queue)s;

-- name: queue_delete_counters
DELETE FROM {schema}.counters WHERE queue = %(queue)s;

-- name: queue_delete_ops
DELETE FROM {schema}.queue_ops WHERE name = %(queue)s;

-- name: queue_delete_subscriptions
DELETE FROM {schema}.subscriptions WHERE queue = %(queue)s;

-- name: queue_delete
DELETE FROM {schema}.queues WHERE name = %(queue)s;

-- name: queue_list
SELECT name, settings FROM {schema}.queues ORDER BY name;

-- name: dedup_claim
-- Returns the id that owns the dedup id (ours when it is new or the old one expired), and
-- whether this statement made the row (a re-run send finds the one its first try made).
-- The window is the queue's as stored now (rule 39).
INSERT INTO {schema}.dedup AS d (queue, dedup_id, message_id, expires_at)
VALUES (%(queue)s, %(dedup_id)s, %(id)s, {schema}.epoch() + coalesce(
    (SELECT dedup_window FROM {schema}.queues WHERE name = %(queue)s), 0))
ON CONFLICT (queue, dedup_id) DO UPDATE
SET message_id = CASE WHEN d.expires_at <= {schema}.epoch() THEN excluded.message_id
                      ELSE d.message_id END,
    expires_at = CASE WHEN d.expires_at <= {schema}.epoch() THEN excluded.expires_at
                      ELSE d.expires_at END
RETURNING message_id, xmax = 0;

-- name: dedup_prune
DELETE FROM {schema}.dedup WHERE ctid = ANY(ARRAY(
    SELECT ctid FROM {schema}.dedup WHERE expires_at <= {schema}.epoch() LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED));

-- name: keys_lock
-- PostgreSQL only (SQLite has one writer at a time): sends and releases of one key take
-- its lock, in one order, so per-key order (rule 17) holds between concurrent writers.
SELECT count(pg_advisory_xact_lock(hashtextextended(k, 0)))
FROM (SELECT k FROM unnest(%(keys)s::text[]) AS k ORDER BY k) AS sorted;

-- name: message_insert
-- Insert and count in one statement, one round trip.
WITH inserted AS (
    INSERT INTO {schema}.messages (id, queue, state, body, body_kind, headers, priority,
                                   ordering_key, sort_key, enqueued_at, available_at,
                                   dedup_id)
    SELECT b.id, b.queue,
           CASE
               WHEN b.ordering_key IS NOT NULL AND (b.key_rank > 1 OR EXISTS (
                   SELECT 1 FROM {schema}.messages k
                   WHERE k.queue = b.queue AND k.ordering_key = b.ordering_key
                     AND (k.state <> 'dead' OR k.parked))) THEN 'blocked'
               WHEN b.delay > 0 THEN 'scheduled'
               ELSE 'ready'
           END,
           b.body, b.body_kind, b.headers, b.priority, b.ordering_key,
           -- The queue's aging and targets as its row holds them now (rule 39).
           {schema}.sort_key(b.priority, {schema}.epoch() + b.delay, qq.aging,
                             (qq.deadlines ->> b.priority)::float8),
           {schema}.epoch(), {schema}.epoch() + b.delay, b.dedup_id
    FROM (
        SELECT u.*, row_number() OVER (PARTITION BY u.queue, u.ordering_key ORDER BY u.ord)
                   AS key_rank
        FROM unnest(%(ids)s::text[], %(queues)s::text[], %(bodies)s::bytea[],
                    %(kinds)s::smallint[], %(headers)s::text[], %(priorities)s::smallint[],
                    %(keys)s::text[], %(delays)s::float8[], %(dedups)s::text[])
             WITH ORDINALITY AS u(id, queue, body, body_kind, headers, priority, ordering_key,
                                  delay, dedup_id, ord)
    ) AS b
    -- No row of the queue (deleted), or a body over its queue's max_message_size as
    -- stored now (rule 39): nothing inserted, the batch is all or none; the caller says
    -- which.
    JOIN {schema}.queues qq ON qq.name = b.queue
    WHERE NOT EXISTS (
        SELECT 1 FROM unnest(%(queues)s::text[], %(bodies)s::bytea[]) AS x(queue, body)
        JOIN {schema}.queues AS s ON s.name = x.queue
        WHERE octet_length(x.body) > s.max_message_size)
    ORDER BY b.ord
    -- The line below is empty on a first try. As message_insert_again (backend.py) it
    -- skips conflicting ids, for a send re-run after its connection broke, which may
    -- find its own rows committed: they are neither stored twice nor counted twice.
    {again}
    RETURNING queue, state, priority
), counted AS (
    INSERT INTO {schema}.counters AS c (queue, shard, sent)
    SELECT queue, pg_backend_pid() %% 16, count(*) FROM inserted GROUP BY queue
    ON CONFLICT (queue, shard) DO UPDATE SET sent = c.sent + excluded.sent
), by_priority AS (
    -- Sends per priority per slot (rule 41: the arrival rates a deadline queue is sized
    -- by), in the counters' shards; rows in key order.
    INSERT INTO {schema}.sends AS s (queue, slot, priority, shard, sent)
    SELECT queue, floor({schema}.epoch() / 10)::bigint, priority, pg_backend_pid() %% 16,
           count(*)
    FROM inserted GROUP BY queue, priority ORDER BY queue, priority
    ON CONFLICT (queue, slot, priority, shard) DO UPDATE SET sent = s.sent + excluded.sent
), woken AS (
    -- Wake receivers waiting in LISTEN, if any waits (wake() in migration 2).
    SELECT {schema}.wake(queue, {channel})
    FROM (SELECT DISTINCT queue FROM inserted WHERE state = 'ready') AS ready
)
SELECT (SELECT count(*) FROM inserted), (SELECT count(*) FROM woken);

-- name: message_insert_one
-- PostgreSQL only: the commonest send, one message without a key, as message_insert
-- without its arrays, window and sort: plain parameters and a plan that stays generic
-- (the array form was planned again for every call on some connections), 0.4 to 0.5 of
-- a bare insert loop's rate instead of 0.4 (docs/performance.md).
WITH inserted AS (
    INSERT INTO {schema}.messages (id, queue, state, body, body_kind, headers, priority,
                                   sort_key, enqueued_at, available_at, dedup_id)
    SELECT %(id)s::text, %(queue)s::text,
           CASE WHEN %(delay)s::float8 > 0 THEN 'scheduled' ELSE 'ready' END,
           %(body)s::bytea, %(kind)s::smallint, %(headers)s::text, %(priority)s::smallint,
           {schema}.sort_key(%(priority)s::integer, {schema}.epoch() + %(delay)s::float8,
                             aging, (deadlines ->> %(priority)s::integer)::float8),
           {schema}.epoch(), {schema}.epoch() + %(delay)s::float8, %(dedup_id)s::text
    -- The queue's aging, targets and largest body as its row holds them now (rule 39).
    FROM {schema}.queues
    WHERE name = %(queue)s::text AND octet_length(%(body)s::bytea) <= max_message_size
    ON CONFLICT (id) DO NOTHING
    RETURNING queue, state, priority
), counted AS (
    INSERT INTO {schema}.counters AS c (queue, shard, sent)
    SELECT queue, pg_backend_pid() %% 16, 1 FROM inserted
    ON CONFLICT (queue, shard) DO UPDATE SET sent = c.sent + 1
), by_priority AS (
    INSERT INTO {schema}.sends AS s (queue, slot, priority, shard, sent)
    SELECT queue, floor({schema}.epoch() / 10)::bigint, priority, pg_backend_pid() %% 16, 1
    FROM inserted
    ON CONFLICT (queue, slot, priority, shard) DO UPDATE SET sent = s.sent + 1
), woken AS (
    SELECT {schema}.wake(queue, {channel}) FROM inserted WHERE state = 'ready'
)
-- How many were inserted: fewer than sent means the queue has no row (deleted), or a
-- re-run found its first try's row.
SELECT (SELECT count(*) FROM inserted), (SELECT count(*) FROM woken);

-- name: scheduled_promote
UPDATE {schema}.messages SET state = 'ready'
WHERE id = ANY(ARRAY(
    SELECT id FROM {schema}.messages
    WHERE queue = %(queue)s AND state = 'scheduled' AND available_at <= {schema}.epoch()
      AND {relaxed}
    LIMIT 1000 FOR UPDATE SKIP LOCKED));

-- name: leases_expire
-- An ended lease gives the message back, or kills it after its last attempt (rule 13),
-- as of the lease's end: reads show the same time and error before upkeep ran. A
-- cancelled message's ended lease (rule 40) marks it 'cancelled' instead, and the caller
-- removes it by the seq and id returned (message_cancel_remove).
UPDATE {schema}.messages
{lease_end_state},
    -- In deadline order (rule 41) the deadline runs from the new available_at; priority
    -- order keeps the key (an aged message keeps its place).
    sort_key = CASE WHEN q.deadlines IS NULL THEN sort_key
                    ELSE lease_until + (q.deadlines ->> priority)::float8 END,
    parked = cancelled_at IS NULL AND attempt >= q.max_attempts
             AND ordering_key IS NOT NULL AND q.park,
    -- A retained attempt (rule 40) says who ran it since when; a cancelled one keeps
    -- the "cancelled" its cancel recorded.
    errors = CASE WHEN cancelled_at IS NOT NULL THEN errors
        ELSE coalesce(errors, '[]'::jsonb) || jsonb_build_array(jsonb_build_object(
        'attempt', attempt, 'error', 'lease expired', 'at', lease_until)
        || CASE WHEN retain > 0 THEN jsonb_build_object(
               'consumer', consumer, 'started', claimed_at) ELSE jsonb_build_object() END)
        END
FROM (SELECT coalesce(max(max_attempts), 5) AS max_attempts,
             coalesce(bool_or(park), false) AS park,
             (SELECT deadlines FROM {schema}.queues WHERE name = %(queue)s) AS deadlines
      FROM {schema}.queues WHERE name = %(queue)s) AS q
WHERE id = ANY(ARRAY(
    SELECT id FROM {schema}.messages
    WHERE queue = %(queue)s AND state = 'leased' AND lease_until <= {schema}.epoch()
      AND {relaxed}
    LIMIT 1000 FOR UPDATE SKIP LOCKED))
RETURNING state, ordering_key, parked, id, seq;

-- name: count_dead
INSERT INTO {schema}.counters AS c (queue, shard, dead_lettered)
VALUES (%(queue)s, pg_backend_pid() %% 16, %(n)s)
ON CONFLICT (queue, shard) DO UPDATE SET dead_lettered = c.dead_lettered + excluded.dead_lettered;

-- name: wait_begin
-- PostgreSQL only (SQLite looks with claimable): before a receiver sleeps, seconds until
-- a delayed message is due or a lease ends, and wait_begin()'s answer (migration 2: 0
-- sleep, 1 a message is ready, 2 look again soon).
-- Paused queues are left out (migration 3): nothing there is worth waking for.
WITH open AS (
    SELECT ARRAY(SELECT u FROM unnest(%(queues)s::text[]) AS u
                 WHERE NOT EXISTS (SELECT 1 FROM {schema}.queue_ops o
                                   WHERE o.name = u AND o.paused)) AS qs
)
SELECT least(
    (SELECT min(available_at) FROM {schema}.messages, open
     WHERE queue = ANY(open.qs) AND state = 'scheduled'),
    (SELECT min(lease_until) FROM {schema}.messages, open
     WHERE queue = ANY(open.qs) AND state = 'leased')
) - {schema}.epoch(), {schema}.wait_begin(%(queues)s::text[], %(waiter)s, %(seconds)s);

-- name: in_flight_lock
-- PostgreSQL only: claims of a capped queue take turns (SQLite has one writer at a time).
SELECT pg_advisory_xact_lock(hashtextextended('hailq in flight ' || %(queue)s, 0));

-- name: in_flight
SELECT count(*) FROM {schema}.messages WHERE queue = %(queue)s AND state = 'leased';

-- part: claim_steps
-- The claim, as message_claim runs it and as message_ack_claim runs it after its acks
-- (where acked_here leaves out the rows the fused statement acks itself, see there).
-- Each leased row draws its fencing token from the schema's sequence (rule 41): nextval
-- in RETURNING runs once per row leased, never for a row looked at and skipped.
picked AS (
    SELECT id FROM {schema}.messages
    WHERE queue = %(queue)s AND state = 'ready' {acked_here} AND {relaxed}
    ORDER BY sort_key, seq
    LIMIT {limit}
    FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE {schema}.messages m
    SET state = 'leased', attempt = m.attempt + 1,
        token = substr(md5(gen_random_uuid()::text), 1, 16),
        lease_until = {schema}.epoch() + %(lease)s {mark}
    -- = ANY(ARRAY(...)), not a join with picked: a generic plan reads its LIMIT as a
    -- tenth of the table, and once the table was analyzed it joined by a scan of every
    -- message (4.9 ms against 0.9 at 20,000 waiting, and growing with the backlog).
    WHERE m.id = ANY(ARRAY(SELECT id FROM picked))
    RETURNING m.id, m.token, m.body, m.body_kind, m.headers, m.priority, m.ordering_key,
              m.attempt, m.enqueued_at, m.lease_until, m.seq, m.sort_key, m.available_at,
              nextval('{schema}.fence') AS fencing_token
), redelivered AS (
    -- Written only when something was redelivered: first deliveries cost nothing here.
    INSERT INTO {schema}.counters AS c (queue, shard, redelivered)
    SELECT %(queue)s, pg_backend_pid() %% 16, count(*) FROM claimed WHERE attempt > 1
    HAVING count(*) > 0
    ON CONFLICT (queue, shard) DO UPDATE SET redelivered = c.redelivered + excluded.redelivered
)

-- name: message_claim
WITH {claim_steps}
SELECT * FROM claimed;

-- name: count_purged
INSERT INTO {schema}.counters AS c (queue, shard, purged)
VALUES (%(queue)s, pg_backend_pid() %% 16, %(n)s)
ON CONFLICT (queue, shard) DO UPDATE SET purged = c.purged + excluded.purged;

-- name: key_release
-- Release the next message of a key once nothing earlier holds it (rule 17).
WITH released AS (
    UPDATE {schema}.messages
    SET state = CASE WHEN available_at > {schema}.epoch() THEN 'scheduled' ELSE 'ready' END
    WHERE id = (
        SELECT id FROM {schema}.messages
        WHERE queue = %(queue)s AND ordering_key = %(key)s AND state = 'blocked'
        ORDER BY seq LIMIT 1
    )
    AND NOT EXISTS (
        SELECT 1 FROM {schema}.messages
        WHERE queue = %(queue)s AND ordering_key = %(key)s
          AND (state IN ('ready', 'scheduled', 'leased') OR (state = 'dead' AND parked))
    )
    RETURNING state
)
SELECT pg_notify({channel}, %(queue)s) FROM released WHERE state = 'ready';

-- name: keys_release
-- key_release for the keys of a batch in one statement, not one round trip per key
-- (for a single key key_release is faster: its plan is a direct index probe). The queue
-- is hidden from the planner like the keys: for a queue it knows, it costed a plan a
-- little lower than the generic one and planned every call anew.
WITH keys AS (
    SELECT DISTINCT k FROM unnest((SELECT %(keys)s::text[])) AS k
), heads AS (
    SELECT (SELECT m.id FROM {schema}.messages m
            WHERE m.queue = (SELECT %(queue)s::text) AND m.ordering_key = keys.k
              AND m.state = 'blocked'
            ORDER BY m.seq LIMIT 1) AS id
    FROM keys
    WHERE NOT EXISTS (
        SELECT 1 FROM {schema}.messages m
        WHERE m.queue = (SELECT %(queue)s::text) AND m.ordering_key = keys.k
          AND (m.state IN ('ready', 'scheduled', 'leased') OR (m.state = 'dead' AND m.parked))
    )
), released AS (
    UPDATE {schema}.messages
    SET state = CASE WHEN available_at > {schema}.epoch() THEN 'scheduled' ELSE 'ready' END
    WHERE id IN (SELECT id FROM heads WHERE id IS NOT NULL)
    RETURNING state
)
SELECT pg_notify({channel}, %(queue)s)
FROM (SELECT 1 FROM released WHERE state = 'ready' LIMIT 1) AS woken;

-- part: history_gone
-- What an ack's DELETE returns for history (rule 40, migration 17): the deleted row's
-- columns under names of their own (h_kept: history keeps it as acked), its body only
-- if its claim marked it to be kept with it.
m.retain > 0 AND m.state <> 'dead' AS h_kept, m.queue AS h_queue, m.dedup_id AS h_dedup,
m.ordering_key AS h_key, m.headers AS h_headers, m.priority AS h_priority,
CASE WHEN m.retain = 2 THEN m.body END AS h_body, m.body_kind AS h_body_kind,
m.attempt AS h_attempts, m.errors AS h_errors, m.consumer AS h_consumer,
m.enqueued_at AS h_enqueued, m.claimed_at AS h_started

-- part: history_kept
-- An ack's history rows, written by the ack statement itself from what its DELETE
-- returned (history_gone): a queue without retention inserts no row. Dead and cancelled
-- rows are recorded by the core (history_record), which clears their mark first.
kept AS (
    INSERT INTO {schema}.history (id, queue, outcome, dedup_id, ordering_key, headers,
                                  priority, body, body_kind, attempts, errors, consumer,
                                  enqueued_at, started_at, finished_at)
    SELECT id, h_queue, 'acked', h_dedup, h_key, h_headers, h_priority, h_body,
           h_body_kind, h_attempts, h_errors, h_consumer, h_enqueued, h_started,
           {schema}.epoch()
    FROM gone WHERE h_kept
)

-- name: message_ack
WITH gone AS (
    DELETE FROM {schema}.messages m
    USING unnest((SELECT %(ids)s::text[]), (SELECT %(tokens)s::text[]),
                 (SELECT %(seqs)s::bigint[])) AS a(id, token, seq)
    WHERE m.id = a.id AND m.token = a.token AND (a.seq IS NULL OR m.seq = a.seq)
      AND m.queue = %(queue)s AND m.state <> 'blocked' AND {relaxed}
    RETURNING m.id, m.token, m.ordering_key,
              (m.state <> 'leased' OR m.lease_until < {schema}.epoch()) AS late,
              {history_gone}
), counted AS (
    -- Written only for late acks: acked itself is derived (sent - present - purged).
    INSERT INTO {schema}.counters AS c (queue, shard, late_acks)
    SELECT %(queue)s, pg_backend_pid() %% 16, count(*) FROM gone WHERE late
    HAVING count(*) > 0
    ON CONFLICT (queue, shard) DO UPDATE SET late_acks = c.late_acks + excluded.late_acks
), {history_kept}
SELECT id, token, ordering_key, late FROM gone;

-- part: ack_plain_steps
-- The acks of messages without a key, of any queues, as message_ack_plain runs them and
-- as message_ack_claim runs them before its claim; late acks are counted per queue.
gone AS (
    DELETE FROM {schema}.messages m
    USING unnest((SELECT %(queues)s::text[]), (SELECT %(ids)s::text[]),
                 (SELECT %(tokens)s::text[]), (SELECT %(seqs)s::bigint[]))
          AS a(queue, id, token, seq)
    WHERE m.id = a.id AND m.token = a.token AND m.queue = a.queue
      AND (a.seq IS NULL OR m.seq = a.seq)
      AND m.ordering_key IS NULL AND m.state <> 'blocked' AND {relaxed}
    RETURNING m.queue, m.id, m.token,
              (m.state <> 'leased' OR m.lease_until < {schema}.epoch()) AS late,
              {history_gone}
), late_counted AS (
    INSERT INTO {schema}.counters AS c (queue, shard, late_acks)
    SELECT queue, pg_backend_pid() %% 16, count(*) FROM gone WHERE late GROUP BY queue
    ON CONFLICT (queue, shard) DO UPDATE SET late_acks = c.late_acks + excluded.late_acks
), {history_kept}

-- name: message_ack_plain
-- PostgreSQL only: acks of messages without a key, of any queues, in one autocommit
-- statement, one round trip (SQLite has no round trips to save); the receipts it does
-- not ack (a key's, or lost) go through message_ack in a transaction with the release.
WITH {ack_plain_steps}
SELECT queue, id, token, late FROM gone;

-- name: message_ack_claim
-- PostgreSQL only: acks of messages without a key, then a claim of an uncapped queue, in
-- one statement and one round trip (the worker's path). Receipts it did not ack (keyed,
-- or lost) go through message_ack next. The claim leaves out the rows this statement
-- deletes (acked_here, rendered by postgres/backend.py): its parts see one snapshot,
-- where a message acked late (its lease ended, nobody received it since) is still
-- ready, and SKIP LOCKED does not skip this transaction's own locks. Without that, such
-- a message was handed back to the caller that had just acked it.
WITH {ack_plain_steps}, {claim_steps}
SELECT false AS acked, *, NULL::boolean FROM claimed
UNION ALL
-- An acked row carries its queue where a claimed one has its key.
SELECT true, id, token, NULL, NULL, NULL, NULL, queue, NULL, NULL, NULL, NULL, NULL, NULL,
       NULL, late
FROM gone;

-- name: message_ack_one
-- With %(plain)s only a message without a key (ack_plain's one-receipt form: scalar
-- parameters plan as a direct probe, where the array form's generic plan did not).
WITH gone AS (
    DELETE FROM {schema}.messages m
    WHERE m.id = %(id)s AND m.token = %(token)s AND m.queue = %(queue)s
      AND m.state <> 'blocked' AND {relaxed}
      AND (%(seq)s::bigint IS NULL OR m.seq = %(seq)s::bigint)
      AND (NOT %(plain)s OR m.ordering_key IS NULL)
    RETURNING m.id, m.token, m.ordering_key,
              (m.state <> 'leased' OR m.lease_until < {schema}.epoch()) AS late,
              {history_gone}
), counted AS (
    INSERT INTO {schema}.counters AS c (queue, shard, late_acks)
    SELECT %(queue)s, pg_backend_pid() %% 16, 1 FROM gone WHERE late
    ON CONFLICT (queue, shard) DO UPDATE SET late_acks = c.late_acks + 1
), {history_kept}
SELECT id, token, ordering_key, late FROM gone;

-- name: messages_present
-- PostgreSQL only: after a lost connection, which of these messages are still there.
SELECT id FROM {schema}.messages WHERE id = ANY(%(ids)s::text[]);

-- name: message_nack
-- %(spare)s (a give-back) never kills a message whose lease still holds; an ended lease
-- of the last attempt is a dead message's (rule 13), marked or not, so it is not found
-- (the receipt lost its lease) whatever the nack.
-- Without %(delay)s the wait is the queue's retry backoff for the attempt, its policy
-- read from the queue's row here (rule 39). A give-back keeps the message's place in line.
WITH q AS (
    SELECT coalesce(max(max_attempts), 5) AS max_attempts,
           coalesce(bool_or(park), false) AS park, max(aging) AS aging,
           (SELECT deadlines FROM {schema}.queues WHERE name = %(queue)s) AS deadlines,
           (SELECT retry FROM {schema}.queues WHERE name = %(queue)s) AS retry
    FROM {schema}.queues WHERE name = %(queue)s
), target AS (
    SELECT m.id, m.attempt >= q.max_attempts AND NOT %(spare)s AS last,
           coalesce(%(delay)s::float8, {schema}.backoff(q.retry, m.attempt)) AS delay
    FROM {schema}.messages m, q
    WHERE m.id = %(id)s AND m.queue = %(queue)s AND m.token = %(token)s
      AND (%(seq)s::bigint IS NULL OR m.seq = %(seq)s::bigint)
      AND m.state IN ('leased', 'ready')
      AND (m.lease_until >= {schema}.epoch() OR m.attempt < q.max_attempts)
      AND {relaxed}
), nacked AS (
    UPDATE {schema}.messages m
    SET state = CASE WHEN %(dead)s OR t.last THEN 'dead'
                     WHEN t.delay > 0 THEN 'scheduled' ELSE 'ready' END,
        dead_at = CASE WHEN %(dead)s OR t.last THEN {schema}.epoch() END,
        parked = (%(dead)s OR t.last) AND m.ordering_key IS NOT NULL AND q.park,
        available_at = {schema}.epoch() + t.delay,
        sort_key = CASE WHEN (q.aging IS NULL AND q.deadlines IS NULL) OR %(spare)s
                        THEN m.sort_key
                        ELSE {schema}.sort_key(m.priority, {schema}.epoch() + t.delay,
                                               q.aging, (q.deadlines ->> m.priority)::float8)
                        END,
        token = NULL,
        lease_until = NULL,
        -- A retained attempt (rule 40) says who ran it since when.
        errors = coalesce(m.errors, '[]'::jsonb) || jsonb_build_array(jsonb_build_object(
            'attempt', m.attempt, 'error', %(error)s::text, 'at', {schema}.epoch())
            || CASE WHEN m.retain > 0 THEN jsonb_build_object(
                   'consumer', m.consumer, 'started', m.claimed_at) ELSE jsonb_build_object() END)
    FROM target t, q
    WHERE m.id = t.id
    RETURNING m.state, m.ordering_key, m.parked
), counted AS (
    INSERT INTO {schema}.counters AS c (queue, shard, nacked, dead_lettered)
    SELECT %(queue)s, pg_backend_pid() %% 16, 1, count(*) FILTER (WHERE state = 'dead')
    FROM nacked HAVING count(*) > 0
    ON CONFLICT (queue, shard) DO UPDATE
    SET nacked = c.nacked + 1, dead_lettered = c.dead_lettered + excluded.dead_lettered
), woken AS (
    SELECT pg_notify({channel}, %(queue)s) FROM nacked WHERE state = 'ready'
)
SELECT state, ordering_key, parked FROM nacked, (SELECT count(*) FROM woken) AS w;

-- name: message_extend
-- An ended lease can be extended while nobody received the message since, unless it
-- ended on the last attempt: that message is dead (rule 13), whether or not upkeep has
-- marked it yet. Without seconds, the queue's lease as its row holds it now (rule 39).
UPDATE {schema}.messages m SET state = 'leased', lease_until = {schema}.epoch() + coalesce(
    e.seconds, (SELECT lease FROM {schema}.queues WHERE name = %(queue)s), 30.0)
FROM unnest((SELECT %(ids)s::text[]), (SELECT %(tokens)s::text[]), (SELECT %(seqs)s::bigint[]),
            (SELECT %(seconds)s::float8[]))
     AS e(id, token, seq, seconds)
WHERE m.id = e.id AND m.token = e.token AND (e.seq IS NULL OR m.seq = e.seq)
  AND m.queue = %(queue)s AND {relaxed}
  AND m.state IN ('leased', 'ready')
  AND (m.lease_until >= {schema}.epoch() OR m.attempt < coalesce(
      (SELECT max_attempts FROM {schema}.queues WHERE name = %(queue)s), 5))
RETURNING m.id, m.token, m.lease_until;

-- name: message_peek
-- Each live message as the next receive would find it, without a write first: a due
-- scheduled message is ready, an ended lease gives its message back, and an ended lease
-- of the last attempt is a dead message's (rule 13), so it is not shown here.
WITH q AS (
    SELECT coalesce(max(max_attempts), 5) AS max_attempts
    FROM {schema}.queues WHERE name = %(queue)s
), t AS (SELECT {schema}.epoch() AS now), live AS (
    SELECT m.id, CASE WHEN m.state = 'scheduled' AND m.available_at <= t.now THEN 'ready'
                      WHEN m.state = 'leased' AND m.lease_until <= t.now THEN 'ready'
                      ELSE m.state END AS state,
           m.body, m.body_kind, m.headers, m.priority, m.ordering_key, m.attempt,
           m.enqueued_at, CASE WHEN m.state = 'leased' AND m.lease_until <= t.now
                               THEN m.lease_until ELSE m.available_at END AS available_at,
           m.sort_key, m.seq
    FROM {schema}.messages AS m CROSS JOIN t LEFT JOIN q ON true
    WHERE m.queue = %(queue)s AND m.state <> 'dead'
      AND NOT (m.state = 'leased' AND m.lease_until <= t.now
               AND m.attempt >= coalesce(q.max_attempts, 5))
)
SELECT id, state, body, body_kind, headers, priority, ordering_key, attempt,
       enqueued_at, available_at
FROM live
ORDER BY CASE state WHEN 'ready' THEN 0 WHEN 'scheduled' THEN 1 WHEN 'blocked' THEN 2
         ELSE 3 END, sort_key, seq
LIMIT %(limit)s;

-- part: dead_filters
-- The filters of dead_list and overview_dead_count (rule 7), in one order.
(%(ordering_key)s::text IS NULL OR ordering_key = %(ordering_key)s::text)
  AND (%(older_than)s::float8 IS NULL
       OR dead_at <= {schema}.epoch() - %(older_than)s::float8)
  AND (%(error)s::text IS NULL
       OR EXISTS (SELECT 1 FROM jsonb_array_elements(errors) AS e
                  WHERE strpos(e ->> 'error', %(error)s::text) > 0))

-- name: dead_list
-- Dead messages, and the ones whose lease ended on their last attempt: dead by rule 13
-- already, shown as upkeep will mark them (same time, same "lease expired" entry).
WITH q AS (
    SELECT coalesce(max(max_attempts), 5) AS max_attempts,
           coalesce(bool_or(park), false) AS park
    FROM {schema}.queues WHERE name = %(queue)s
), dead AS (
    SELECT id, body, body_kind, headers, priority, ordering_key, attempt, enqueued_at,
           dead_at, errors, parked, seq
    FROM {schema}.messages WHERE queue = %(queue)s AND state = 'dead'
    UNION ALL
    SELECT m.id, m.body, m.body_kind, m.headers, m.priority, m.ordering_key, m.attempt,
           m.enqueued_at, m.lease_until,
           coalesce(m.errors, '[]'::jsonb) || jsonb_build_array(jsonb_build_object(
               'attempt', m.attempt, 'error', 'lease expired', 'at', m.lease_until)),
           m.ordering_key IS NOT NULL AND q.park, m.seq
    FROM {schema}.messages AS m JOIN q ON true
    WHERE m.queue = %(queue)s AND m.state = 'leased' AND m.lease_until <= {schema}.epoch()
      AND m.attempt >= q.max_attempts AND m.cancelled_at IS NULL
)
SELECT id, body, body_kind, headers, priority, ordering_key, attempt, enqueued_at,
       dead_at, errors, parked
FROM dead
WHERE {dead_filters}
ORDER BY CASE WHEN %(newest)s::boolean THEN dead_at END DESC,
         CASE WHEN %(newest)s::boolean THEN seq END DESC, dead_at, seq
LIMIT %(limit)s;

-- name: dead_keys
SELECT DISTINCT ordering_key FROM {schema}.messages
WHERE queue = %(queue)s AND state = 'dead' AND ordering_key IS NOT NULL
  AND (%(all)s OR id = ANY(%(ids)s::text[]));

-- name: dead_redrive
-- Redriven keyed messages wait behind their key; key_release then frees the oldest.
UPDATE {schema}.messages
SET state = CASE WHEN ordering_key IS NULL THEN 'ready' ELSE 'blocked' END,
    attempt = 0, parked = false, dead_at = NULL, token = NULL, lease_until = NULL,
    available_at = {schema}.epoch(),
    sort_key = {schema}.sort_key(priority, {schema}.epoch(), q.aging,
                                 (q.deadlines ->> priority)::float8)
FROM (SELECT max(aging) AS aging,
             (SELECT deadlines FROM {schema}.queues WHERE name = %(queue)s) AS deadlines
      FROM {schema}.queues WHERE name = %(queue)s) AS q
WHERE queue = %(queue)s AND state = 'dead' AND (%(all)s OR id = ANY(%(ids)s::text[]));

-- name: purge_dead
DELETE FROM {schema}.messages WHERE queue = %(queue)s AND state = 'dead'
RETURNING ordering_key, parked;

-- name: purge_live
DELETE FROM {schema}.messages WHERE queue = %(queue)s AND state <> 'dead';

-- name: stats
-- One statement, one snapshot, each count served by its state's partial index; counted as
-- the next receive would find them (a read writes nothing): due scheduled messages are
-- ready, ended leases ready again or, after the last attempt, dead (rule 13).
-- acked = sent - present - purged.
SELECT r.n + d.n + e.n - k.n, s.n - d.n, l.n - e.n, b.n, x.n + k.n,
       (SELECT min(enqueued_at) FROM {schema}.messages
        WHERE queue = %(queue)s AND (state = 'ready'
                                     OR (state = 'scheduled' AND available_at <= t.now)
                                     OR (state = 'leased' AND lease_until <= t.now
                                         AND attempt < q.max_attempts))),
       r.n + s.n + l.n + b.n + x.n,
       c.sent, c.purged, c.nacked, c.redelivered, coalesce(c.dead_lettered, 0) + k.n,
       c.late_acks, t.now
FROM (SELECT {schema}.epoch() AS now) AS t
CROSS JOIN (SELECT coalesce(max(max_attempts), 5) AS max_attempts
            FROM {schema}.queues WHERE name = %(queue)s) AS q
CROSS JOIN LATERAL (SELECT count(*) AS n FROM {schema}.messages
                    WHERE queue = %(queue)s AND state = 'ready') AS r
CROSS JOIN LATERAL (SELECT count(*) AS n FROM {schema}.messages
                    WHERE queue = %(queue)s AND state = 'scheduled') AS s
CROSS JOIN LATERAL (SELECT count(*) AS n FROM {schema}.messages
                    WHERE queue = %(queue)s AND state = 'scheduled'
                      AND available_at <= t.now) AS d
CROSS JOIN LATERAL (SELECT count(*) AS n FROM {schema}.messages
                    WHERE queue = %(queue)s AND state = 'leased') AS l
CROSS JOIN LATERAL (SELECT count(*) AS n FROM {schema}.messages
                    WHERE queue = %(queue)s AND state = 'leased'
                      AND lease_until <= t.now) AS e
CROSS JOIN LATERAL (SELECT count(*) AS n FROM {schema}.messages
                    WHERE queue = %(queue)s AND state = 'leased'
                      AND lease_until <= t.now AND attempt >= q.max_attempts) AS k
CROSS JOIN LATERAL (SELECT count(*) AS n FROM {schema}.messages
                    WHERE queue = %(queue)s AND ordering_key IS NOT NULL
                      AND state = 'blocked') AS b
CROSS JOIN LATERAL (SELECT count(*) AS n FROM {schema}.messages
                    WHERE queue = %(queue)s AND state = 'dead') AS x
CROSS JOIN LATERAL (SELECT sum(sent) AS sent, sum(purged) AS purged, sum(nacked) AS nacked,
                           sum(redelivered) AS redelivered, sum(dead_lettered) AS dead_lettered,
                           sum(late_acks) AS late_acks
                    FROM {schema}.counters WHERE queue = %(queue)s) AS c;

-- name: stats_parked
SELECT DISTINCT ordering_key FROM {schema}.messages
WHERE queue = %(queue)s AND ordering_key IS NOT NULL
  AND ((state = 'dead' AND parked)
       OR (state = 'leased' AND lease_until <= {schema}.epoch()
           AND (SELECT park AND attempt >= max_attempts
                FROM {schema}.queues WHERE name = %(queue)s)))
ORDER BY ordering_key;

-- name: topic_save
INSERT INTO {schema}.topics (name, created_at) VALUES (%(name)s, {schema}.epoch())
ON CONFLICT (name) DO NOTHING;

-- name: topic_get
SELECT name FROM {schema}.topics WHERE name = %(name)s;

-- name: topic_delete
DELETE FROM {schema}.topics WHERE name = %(name)s;

-- name: topic_subscriptions_delete
DELETE FROM {schema}.subscriptions WHERE topic = %(name)s;

-- name: topic_list
SELECT name FROM {schema}.topics ORDER BY name;

-- name: subscription_save
INSERT INTO {schema}.subscriptions (topic, queue, filter, created_at)
VALUES (%(topic)s, %(queue)s, %(filter)s, {schema}.epoch())
ON CONFLICT (topic, queue) DO UPDATE SET filter = excluded.filter;

-- name: subscription_list
SELECT topic, queue, filter FROM {schema}.subscriptions WHERE topic = %(topic)s ORDER BY queue;

-- name: subscription_delete
DELETE FROM {schema}.subscriptions WHERE topic = %(topic)s AND queue = %(queue)s;

-- name: message_get
-- One message by id, as stored, with what its state as the next receive would find it
-- depends on (the queue's attempts and dead-letter policy, the clock).
SELECT m.id, m.state, m.body, m.body_kind, m.headers, m.priority, m.ordering_key,
       m.attempt, m.enqueued_at, m.available_at, m.lease_until, m.dead_at, m.errors,
       m.parked, coalesce(q.max_attempts, 5), coalesce(q.park, false), {schema}.epoch(),
       m.cancelled_at
FROM {schema}.messages AS m LEFT JOIN {schema}.queues AS q ON q.name = m.queue
WHERE m.queue = %(queue)s AND m.id = %(id)s;

-- name: message_delete
-- One message by id, whatever its state (a leased one's consumer then gets LeaseLost).
DELETE FROM {schema}.messages WHERE queue = %(queue)s AND id = %(id)s
RETURNING ordering_key;

-- name: message_locate
-- The queue of a live message, by id alone (an operator's cancel without a queue).
SELECT queue FROM {schema}.messages WHERE id = %(id)s AND state <> 'dead';

-- name: message_cancel_find
-- Rule 40: the message to cancel, after upkeep settled its queue (a due delay is ready,
-- an ended lease returned or dead); locked, so a claim or an ack waits for the cancel.
SELECT seq, id, state, ordering_key, cancelled_at FROM {schema}.messages
WHERE queue = %(queue)s AND id = %(id)s
FOR UPDATE;

-- name: message_cancel_running
-- A running message is marked, not removed: it keeps its lease, so its max_in_flight
-- slot and its ordering key, until its handler has stopped or its lease has ended. Its
-- token gets a prefix no receipt has: every ack, nack and extend of it is refused; the
-- settle of the cancelled lease (message_cancelled) still finds it. The attempt records
-- "cancelled".
UPDATE {schema}.messages
SET token = 'cancelled:' || token, cancelled_at = {schema}.epoch(),
    errors = coalesce(errors, '[]'::jsonb) || jsonb_build_array(jsonb_build_object(
        'attempt', attempt, 'error', 'cancelled', 'at', {schema}.epoch()))
WHERE id = %(id)s AND seq = %(seq)s AND state = 'leased' AND cancelled_at IS NULL;

-- name: message_cancelled
-- Of these leases, the messages an operator cancelled: a worker's poll of its messages
-- in flight, and the settle of a cancelled message whose handler stopped.
SELECT m.seq, m.id, m.ordering_key
FROM unnest((SELECT %(ids)s::text[]), (SELECT %(tokens)s::text[])) AS l(id, token)
JOIN {schema}.messages AS m ON m.id = l.id AND m.token = 'cancelled:' || l.token
WHERE m.queue = %(queue)s AND m.cancelled_at IS NOT NULL;

-- name: message_cancel_remove
-- Rule 40: a cancelled message leaves (waiting: at once; running: once its handler has
-- stopped or its lease has ended).
DELETE FROM {schema}.messages
WHERE id = ANY(%(ids)s::text[]) AND queue = %(queue)s;

-- name: worker_save
-- ``running``: what each slot runs now, as JSON [[id, queue, attempt, since], ...].
INSERT INTO {schema}.workers (id, host, pid, queues, concurrency, in_flight, started_at,
                              last_seen, state, running)
VALUES (%(id)s, %(host)s, %(pid)s, %(queues)s, %(concurrency)s, %(in_flight)s,
        %(started_at)s, {schema}.epoch(), %(state)s, %(running)s)
ON CONFLICT (id) DO UPDATE SET queues = excluded.queues, in_flight = excluded.in_flight,
    concurrency = excluded.concurrency, last_seen = excluded.last_seen, state = excluded.state,
    running = excluded.running;

-- name: worker_list
SELECT id, host, pid, queues, concurrency, in_flight, started_at, last_seen, state, running
FROM {schema}.workers ORDER BY started_at, id;

-- name: worker_prune
DELETE FROM {schema}.workers WHERE id IN (
    SELECT id FROM {schema}.workers WHERE last_seen < %(before)s LIMIT %(limit)s);

-- name: clock_now
-- PostgreSQL only: the database's clock (SQLite's is the process's).
SELECT {schema}.epoch();

-- name: rate_take
-- Rule 33: a claim of a rate-limited queue takes min(n, whole tokens) from the queue's
-- bucket, refilled at rate tokens a second up to burst; the upsert locks the bucket's row
-- until the claim commits, so claims of a limited queue take turns (unlimited queues
-- never run it). A new bucket starts full. Every SET reads the old row.
INSERT INTO {schema}.rate_buckets AS b (queue, tokens, refilled_at, taken)
VALUES (%(queue)s, %(burst)s - least(%(n)s, floor(%(burst)s)), {schema}.epoch(),
        least(%(n)s, floor(%(burst)s)))
ON CONFLICT (queue) DO UPDATE SET
    taken = least(%(n)s, floor(least(%(burst)s, b.tokens
            + greatest(0.0, {schema}.epoch() - b.refilled_at) * %(rate)s))),
    tokens = least(%(burst)s, b.tokens
             + greatest(0.0, {schema}.epoch() - b.refilled_at) * %(rate)s)
             - least(%(n)s, floor(least(%(burst)s, b.tokens
               + greatest(0.0, {schema}.epoch() - b.refilled_at) * %(rate)s))),
    refilled_at = greatest(b.refilled_at, {schema}.epoch())
RETURNING taken;

-- name: rate_return
-- Tokens a claim took but found no message for go back, in the same transaction.
UPDATE {schema}.rate_buckets SET tokens = tokens + %(n)s WHERE queue = %(queue)s;

-- name: rate_due
-- Seconds until the next whole token of each rate-limited queue among the queues (0 or
-- less: one is there): a limited receiver sleeps that long instead of polling.
SELECT b.queue,
       (1.0 - least(q.burst, b.tokens
        + greatest(0.0, {schema}.epoch() - b.refilled_at) * q.rate_per_second))
       / q.rate_per_second
FROM {schema}.rate_buckets AS b JOIN {schema}.queues AS q ON q.name = b.queue
WHERE b.queue = ANY(%(queues)s::text[]) AND q.rate_per_second IS NOT NULL;

-- name: queue_rate_save
-- A queue's rate limit as columns the claim reads (NULL: unlimited).
UPDATE {schema}.queues SET rate_per_second = %(rate)s, burst = %(burst)s
WHERE name = %(name)s;

-- name: queue_rate
SELECT rate_per_second, burst FROM {schema}.queues WHERE name = %(queue)s;

-- name: schedule_save
-- Rule 35: declare a schedule, or update its definition. A new one starts with its
-- creation time as its last slot, so slots from before it existed never fire; an
-- existing one keeps its last slot, its pause and its counts.
INSERT INTO {schema}.schedules AS s (name, queue, cron, every, timezone, catch_up, body,
                                     body_kind, headers, priority, source, created_at,
                                     declared_at, last_slot)
VALUES (%(name)s, %(queue)s, %(cron)s, %(every)s, %(timezone)s, %(catch_up)s, %(body)s,
        %(body_kind)s, %(headers)s, %(priority)s, %(source)s, %(now)s, %(now)s, %(now)s)
ON CONFLICT (name) DO UPDATE SET queue = excluded.queue, cron = excluded.cron,
    every = excluded.every, timezone = excluded.timezone, catch_up = excluded.catch_up,
    body = excluded.body, body_kind = excluded.body_kind, headers = excluded.headers,
    priority = excluded.priority, source = excluded.source,
    declared_at = greatest(s.declared_at, excluded.declared_at);

-- name: schedule_declare
-- A running scheduler still declares these (its app's app.periodic): see "declared".
UPDATE {schema}.schedules SET declared_at = greatest(declared_at, %(now)s)
WHERE name = ANY(%(names)s::text[]);

-- name: schedule_list
SELECT name, queue, cron, every, timezone, catch_up, body, body_kind, headers, priority,
       source, paused, created_at, declared_at, last_slot, fired_at, fired
FROM {schema}.schedules ORDER BY name;

-- name: schedule_fire
-- Claim slots: only the scheduler that saw last_slot as it is moves it, in the
-- transaction that sends the slots' messages, so each slot is sent once however many
-- schedulers run (a second one waits for the row, then finds it moved).
UPDATE {schema}.schedules SET last_slot = %(slot)s, fired_at = %(now)s, fired = fired + %(n)s
WHERE name = %(name)s AND last_slot = %(seen)s AND last_slot < %(slot)s AND NOT paused;

-- name: schedule_pause
-- A resumed schedule skips the slots of its pause: it goes on from now.
UPDATE {schema}.schedules SET paused = %(paused)s,
    last_slot = CASE WHEN %(paused)s THEN last_slot ELSE greatest(last_slot, %(now)s) END
WHERE name = %(name)s;

-- name: schedule_delete
DELETE FROM {schema}.schedules WHERE name = %(name)s;

-- name: figures_histogram_add
-- Figures (rule 25), written by a worker's recorder once a second: the buckets of wait
-- and handler-time histograms grow by what the process saw since its last flush. All of
-- a flush in one statement (JSON rows; le null for the last bucket) and in key order:
-- workers flushing at once lock the shared rows briefly and in the same order.
INSERT INTO {schema}.histograms AS h (queue, kind, priority, le, n, total)
SELECT r.queue, r.kind, r.priority, COALESCE(r.le, 'Infinity'::float8), r.n, r.total
FROM jsonb_to_recordset(%(rows)s::jsonb)
     AS r(queue text, kind text, priority integer, le float8, n bigint, total float8)
ORDER BY 1, 2, 3, 4
ON CONFLICT (queue, kind, priority, le) DO UPDATE
SET n = h.n + excluded.n, total = h.total + excluded.total;

-- name: figures_rate_add
-- This 10-second slot's claims, acks, failures, breaches, handler seconds, redeliveries
-- and inbox runs grow, for every (queue, priority) of the flush in one statement, in key
-- order.
INSERT INTO {schema}.rates AS r (queue, slot, priority, started, acked, failed, breaches,
                                 handler_total, redelivered, inbox, late_acks)
SELECT x.queue, floor({schema}.epoch() / 10)::bigint, x.priority, x.started, x.acked,
       x.failed, x.breaches, x.handler_total, x.redelivered, x.inbox, x.late_acks
FROM jsonb_to_recordset(%(rows)s::jsonb)
     AS x(queue text, priority integer, started bigint, acked bigint, failed bigint,
          breaches bigint, handler_total float8, redelivered bigint, inbox bigint,
          late_acks bigint)
ORDER BY 1, 3
ON CONFLICT (queue, slot, priority) DO UPDATE
SET started = r.started + excluded.started, acked = r.acked + excluded.acked,
    failed = r.failed + excluded.failed, breaches = r.breaches + excluded.breaches,
    handler_total = r.handler_total + excluded.handler_total,
    redelivered = r.redelivered + excluded.redelivered, inbox = r.inbox + excluded.inbox,
    late_acks = r.late_acks + excluded.late_acks;

-- name: figures_sketch_add
-- Rule 36: the log buckets (hailq/observe/sketch.py) of this 10-second slot's waits and
-- handler times grow, all of a flush in one statement, in key order.
INSERT INTO {schema}.sketches AS k (queue, kind, priority, slot, bucket, n)
SELECT x.queue, x.kind, x.priority, floor({schema}.epoch() / 10)::bigint, x.bucket, x.n
FROM jsonb_to_recordset(%(rows)s::jsonb)
     AS x(queue text, kind text, priority integer, bucket integer, n bigint)
ORDER BY 1, 2, 3, 5
ON CONFLICT (queue, kind, priority, slot, bucket) DO UPDATE SET n = k.n + excluded.n;

-- name: figures_range_add
-- Each sketch's count, sum, minimum and maximum in this slot (percentiles are clamped
-- into the observed range).
INSERT INTO {schema}.sketch_ranges AS g (queue, kind, priority, slot, n, total, lo, hi)
SELECT x.queue, x.kind, x.priority, floor({schema}.epoch() / 10)::bigint, x.n, x.total,
       x.lo, x.hi
FROM jsonb_to_recordset(%(rows)s::jsonb)
     AS x(queue text, kind text, priority integer, n bigint, total float8, lo float8,
          hi float8)
ORDER BY 1, 2, 3
ON CONFLICT (queue, kind, priority, slot) DO UPDATE
SET n = g.n + excluded.n, total = g.total + excluded.total,
    lo = least(g.lo, excluded.lo), hi = greatest(g.hi, excluded.hi);

-- name: figures_count_acked
-- Acks counted per queue as flushed (rates of acks over the same span as sends), on this
-- connection's shard; a queue deleted meanwhile gets no counter row back.
INSERT INTO {schema}.counters AS c (queue, shard, acked)
SELECT x.queue, pg_backend_pid() %% 16, x.n
FROM jsonb_to_recordset(%(rows)s::jsonb) AS x(queue text, n bigint)
WHERE EXISTS (SELECT 1 FROM {schema}.queues WHERE name = x.queue)
ORDER BY 1
ON CONFLICT (queue, shard) DO UPDATE SET acked = c.acked + excluded.acked;

-- name: figures_sample
-- The queue's counters as of now, the last sample of each second kept: rates of sends,
-- acks and deaths over one span without a write per send.
INSERT INTO {schema}.samples AS s (queue, slot, at, sent, dead_lettered, acked)
SELECT %(queue)s, floor({schema}.epoch())::bigint, {schema}.epoch(),
       coalesce(sum(sent), 0), coalesce(sum(dead_lettered), 0), coalesce(sum(acked), 0)
FROM {schema}.counters WHERE queue = %(queue)s
ON CONFLICT (queue, slot) DO UPDATE
SET at = excluded.at, sent = excluded.sent, dead_lettered = excluded.dead_lettered,
    acked = excluded.acked;

-- part: prune_slots
-- At most %(limit)s rows of table $1 older than $2 slots of ten seconds, a range of its
-- slot index.
DELETE FROM {schema}.$1 WHERE ctid IN (
    SELECT ctid FROM {schema}.$1
    WHERE slot < floor({schema}.epoch() / 10)::bigint - $2 LIMIT %(limit)s)

-- name: figures_prune_rates
-- Rate slots are kept a day (hailq doctor's longest window) and a minute.
{prune_slots(rates, 8646)};

-- name: figures_prune_sends
-- Sends per priority are kept an hour (the longest rate window) and a minute.
{prune_slots(sends, 366)};

-- name: figures_prune_sketches
-- Sketches are kept an hour (the longest window of percentiles) and a minute.
{prune_slots(sketches, 366)};

-- name: figures_prune_ranges
{prune_slots(sketch_ranges, 366)};

-- name: figures_prune_samples
-- Samples are kept an hour and a minute, and the newest of each queue always: the
-- counters a later rate starts from.
DELETE FROM {schema}.samples WHERE ctid IN (
    SELECT ctid FROM {schema}.samples AS s
    WHERE slot < floor({schema}.epoch())::bigint - 3660
      AND slot < (SELECT max(slot) FROM {schema}.samples WHERE queue = s.queue)
    LIMIT %(limit)s);

-- name: figures_histograms
SELECT kind, priority, le, n, total FROM {schema}.histograms
WHERE queue = %(queue)s ORDER BY kind, priority, le;

-- name: figures_rates
-- The last hour and a slot, per slot and priority.
SELECT slot, priority, started, acked, failed, breaches, handler_total, redelivered, inbox,
       late_acks
FROM {schema}.rates
WHERE queue = %(queue)s AND slot >= floor((%(now)s - %(long)s) / 10)::bigint
ORDER BY slot, priority;

-- name: figures_sends
-- Sends per slot and priority over the last hour and a slot (rule 41), the shards summed.
SELECT slot, priority, sum(sent)
FROM {schema}.sends
WHERE queue = %(queue)s AND slot >= floor((%(now)s - %(long)s) / 10)::bigint
GROUP BY slot, priority
ORDER BY slot, priority;

-- name: figures_window
-- hailq doctor's window (rule 26): the slots since %(since)s, the one holding it included.
SELECT slot, priority, started, acked, failed, breaches, handler_total, redelivered, inbox,
       late_acks
FROM {schema}.rates
WHERE queue = %(queue)s AND slot >= floor(%(since)s / 10)::bigint
ORDER BY slot, priority;

-- name: figures_sketches
-- The sketch buckets of the short (window 0) and the long window (1), summed over slots.
SELECT 0, kind, priority, bucket, sum(n) FROM {schema}.sketches
WHERE queue = %(queue)s AND slot >= floor((%(now)s - %(short)s) / 10)::bigint
GROUP BY kind, priority, bucket
UNION ALL
SELECT 1, kind, priority, bucket, sum(n) FROM {schema}.sketches
WHERE queue = %(queue)s AND slot >= floor((%(now)s - %(long)s) / 10)::bigint
GROUP BY kind, priority, bucket;

-- name: figures_ranges
SELECT 0, kind, priority, sum(n), sum(total), min(lo), max(hi) FROM {schema}.sketch_ranges
WHERE queue = %(queue)s AND slot >= floor((%(now)s - %(short)s) / 10)::bigint
GROUP BY kind, priority
UNION ALL
SELECT 1, kind, priority, sum(n), sum(total), min(lo), max(hi) FROM {schema}.sketch_ranges
WHERE queue = %(queue)s AND slot >= floor((%(now)s - %(long)s) / 10)::bigint
GROUP BY kind, priority;

-- name: figures_points
-- Where each rate window (%(w0)s, %(w1)s, %(w2)s seconds) starts (hailq/observe/figures.py):
-- the last sample at or before its start (0), and the first after it (1).
SELECT w.w, 0, s.at, s.sent, s.dead_lettered, s.acked
FROM (VALUES (%(w0)s::float8), (%(w1)s::float8), (%(w2)s::float8)) AS w(w)
CROSS JOIN LATERAL (
    SELECT at, sent, dead_lettered, acked FROM {schema}.samples
    WHERE queue = %(queue)s AND slot <= floor(%(now)s::float8 - w.w)::bigint
    ORDER BY slot DESC LIMIT 1
) AS s
UNION ALL
SELECT w.w, 1, s.at, s.sent, s.dead_lettered, s.acked
FROM (VALUES (%(w0)s::float8), (%(w1)s::float8), (%(w2)s::float8)) AS w(w)
CROSS JOIN LATERAL (
    SELECT at, sent, dead_lettered, acked FROM {schema}.samples
    WHERE queue = %(queue)s AND slot > floor(%(now)s::float8 - w.w)::bigint
    ORDER BY slot LIMIT 1
) AS s;

-- name: figures_queue
-- When the queue was made (its counters start then) and its acks as flushed so far.
SELECT q.created_at, coalesce((SELECT sum(acked) FROM {schema}.counters
                               WHERE queue = q.name), 0)
FROM {schema}.queues AS q WHERE q.name = %(queue)s;

-- name: overview_plan
-- PostgreSQL only (SQLite compiles nothing): the overview's statement below plans as
-- costly (a subquery per count and queue), which makes the server compile it to machine
-- code first, a second spent to save milliseconds; off for this transaction only.
SELECT set_config('jit', 'off', true);

-- part: capped_count
-- How many of the queue's messages match $1, counted no further than %(cap)s.
(SELECT count(*) FROM (SELECT 1 FROM {schema}.messages
                       WHERE queue = q.name AND $1 LIMIT %(cap)s) AS x)

-- name: overview_queues
-- The dashboard's overview (hailq/backends/overview.py): every queue in one statement,
-- one row each. Each count stops at %(cap)s rows (the caller passes its limit + 1, so a
-- count of cap reads "more than the limit"): each is a range of its state's partial
-- index, so a million messages cost what a few thousand do. Counted as ``stats`` counts
-- them (due delays ready, ended leases ready or dead). The oldest ready message of a
-- queue with strict priority is exact: per priority the first row of its range of the
-- ready index by seq (ids and seq grow with time); with aging or in deadline order, the
-- oldest of the first cap in delivery order.
SELECT q.name, q.settings, o.overrides, coalesce(o.paused, false),
       n.ready, n.scheduled, n.due, n.leased, n.ended, n.killed, n.blocked, n.dead,
       (SELECT min(e) FROM (
            SELECT (SELECT m.enqueued_at FROM {schema}.messages AS m
                    WHERE m.queue = q.name AND m.state = 'ready'
                      AND m.sort_key = -p::float8
                    ORDER BY m.seq LIMIT 1) AS e
            FROM generate_series(0, 9) AS p WHERE q.aging IS NULL AND q.deadlines IS NULL
            UNION ALL
            SELECT min(enqueued_at) FROM (SELECT enqueued_at FROM {schema}.messages
                                          WHERE queue = q.name AND state = 'ready'
                                            AND (q.aging IS NOT NULL
                                                 OR q.deadlines IS NOT NULL)
                                          ORDER BY sort_key, seq LIMIT %(cap)s) AS a
            UNION ALL
            SELECT min(enqueued_at) FROM (SELECT enqueued_at FROM {schema}.messages
                                          WHERE queue = q.name AND state = 'scheduled'
                                            AND available_at <= t.now LIMIT %(cap)s) AS d
            UNION ALL
            SELECT min(enqueued_at) FROM (SELECT enqueued_at FROM {schema}.messages
                                          WHERE queue = q.name AND state = 'leased'
                                            AND lease_until <= t.now
                                            AND attempt < q.max_attempts
                                          LIMIT %(cap)s) AS l) AS oldest),
       coalesce(c.sent, 0), coalesce(c.dead_lettered, 0), coalesce(c.purged, 0),
       q.created_at, coalesce(c.acked, 0), t.now
FROM (SELECT {schema}.epoch() AS now) AS t
CROSS JOIN {schema}.queues AS q
LEFT JOIN {schema}.queue_ops AS o ON o.name = q.name
CROSS JOIN LATERAL (
    SELECT {capped_count(state = 'ready')} AS ready,
           {capped_count(state = 'scheduled')} AS scheduled,
           {capped_count(state = 'scheduled' AND available_at <= t.now)} AS due,
           {capped_count(state = 'leased')} AS leased,
           {capped_count(state = 'leased' AND lease_until <= t.now)} AS ended,
           {capped_count(state = 'leased' AND lease_until <= t.now
                         AND attempt >= q.max_attempts)} AS killed,
           {capped_count(ordering_key IS NOT NULL AND state = 'blocked')} AS blocked,
           {capped_count(state = 'dead')} AS dead
) AS n
LEFT JOIN LATERAL (SELECT sum(sent) AS sent, sum(dead_lettered) AS dead_lettered,
                          sum(purged) AS purged, sum(acked) AS acked
                   FROM {schema}.counters WHERE queue = q.name) AS c ON true
ORDER BY q.name;

-- name: overview_histograms
-- Every queue's histograms (what breaches and percentiles are made of).
SELECT queue, kind, priority, le, n, total FROM {schema}.histograms
ORDER BY queue, kind, priority, le;

-- name: overview_rates
SELECT queue, slot, priority, started, acked, failed, breaches, handler_total, redelivered,
       inbox, late_acks
FROM {schema}.rates WHERE slot >= floor((%(now)s - %(short)s) / 10)::bigint
ORDER BY queue, slot, priority;

-- name: overview_sketches
-- Every queue's sketch buckets of the short window (the overview shows that one only).
SELECT queue, kind, priority, bucket, sum(n) FROM {schema}.sketches
WHERE slot >= floor((%(now)s - %(short)s) / 10)::bigint
GROUP BY queue, kind, priority, bucket;

-- name: overview_ranges
SELECT queue, kind, priority, sum(n), sum(total), min(lo), max(hi) FROM {schema}.sketch_ranges
WHERE slot >= floor((%(now)s - %(short)s) / 10)::bigint
GROUP BY queue, kind, priority;

-- name: overview_dead_count
-- How many dead letters ``dead_list`` would list with these filters, counting at most
-- %(cap)s (the dashboard's confirmation of a bulk action says how many it touches).
WITH q AS (
    SELECT coalesce(max(max_attempts), 5) AS max_attempts
    FROM {schema}.queues WHERE name = %(queue)s
)
SELECT count(*) FROM (
    SELECT 1 FROM (
        SELECT dead_at, errors, ordering_key FROM {schema}.messages
        WHERE queue = %(queue)s AND state = 'dead'
        UNION ALL
        SELECT m.lease_until,
               coalesce(m.errors, '[]'::jsonb) || jsonb_build_array(jsonb_build_object(
                   'attempt', m.attempt, 'error', 'lease expired', 'at', m.lease_until)),
               m.ordering_key
        FROM {schema}.messages AS m JOIN q ON true
        WHERE m.queue = %(queue)s AND m.state = 'leased'
          AND m.lease_until <= {schema}.epoch() AND m.attempt >= q.max_attempts
    ) AS dead
    WHERE {dead_filters}
    LIMIT %(cap)s
) AS matching;

-- name: autoscale_record
-- Rule 24: one decision of an autoscaler, on the database's clock.
INSERT INTO {schema}.autoscale (autoscaler, queue, host, pid, at, workers, desired,
                                decision, reason, ceiling, minimum, maximum, throughput,
                                handler_time)
VALUES (%(autoscaler)s, %(queue)s, %(host)s, %(pid)s, {schema}.epoch(), %(workers)s,
        %(desired)s, %(decision)s, %(reason)s, %(ceiling)s, %(minimum)s, %(maximum)s,
        %(throughput)s, %(handler_time)s);

-- name: autoscale_prune
DELETE FROM {schema}.autoscale WHERE ctid IN (
    SELECT ctid FROM {schema}.autoscale WHERE at < {schema}.epoch() - %(keep)s
    LIMIT %(limit)s);

-- name: autoscale_list
-- The last decisions, newest first, of one queue's autoscalers (or every queue's).
SELECT autoscaler, queue, host, pid, workers, desired, decision, reason, at, ceiling,
       minimum, maximum, throughput, handler_time
FROM {schema}.autoscale
WHERE (%(queue)s::text IS NULL OR queue = %(queue)s) AND at >= %(since)s
ORDER BY seq DESC LIMIT %(limit)s;

-- name: autoscale_latest
-- The last decision of each autoscaler seen since %(since)s, by queue.
SELECT DISTINCT ON (queue, autoscaler) autoscaler, queue, host, pid, workers, desired,
       decision, reason, at, ceiling, minimum, maximum, throughput, handler_time
FROM {schema}.autoscale
WHERE at >= %(since)s AND (%(queue)s::text IS NULL OR queue = %(queue)s)
ORDER BY queue, autoscaler, seq DESC;

-- name: deadline_pool_save
-- PostgreSQL only (its desired_workers view reads them, migration 16): the pools of the
-- queues in deadline order as the maintenance duty found them, one row per queue, and
-- rows not replaced for an hour go.
WITH gone AS (
    DELETE FROM {schema}.deadline_pools
    WHERE at < {schema}.epoch() - 3600 AND NOT queue = ANY(%(queues)s::text[])
)
INSERT INTO {schema}.deadline_pools AS p (queue, workers, reason, at)
SELECT q, w, r, {schema}.epoch()
FROM unnest((SELECT %(queues)s::text[]), (SELECT %(workers)s::integer[]),
            (SELECT %(reasons)s::text[])) AS a(q, w, r)
ON CONFLICT (queue) DO UPDATE
SET workers = excluded.workers, reason = excluded.reason,
    at = excluded.at;

-- name: levels_now
-- Queue levels over time (hailq/backends/levels.py): the clock a slot is taken on.
SELECT {schema}.epoch();

-- name: levels_taken
-- Whether some process recorded this slot already (it then counts nothing).
SELECT 1 FROM {schema}.levels WHERE slot = %(slot)s LIMIT 1;

-- name: levels_add
-- One slot's levels of every queue; a row some other process wrote first stays.
INSERT INTO {schema}.levels (queue, slot, at, ready, in_flight, delayed, blocked, dead,
                             sent, acked, capped)
SELECT x.queue, %(slot)s, %(at)s, x.ready, x.in_flight, x.delayed, x.blocked, x.dead,
       x.sent, x.acked, x.capped
FROM jsonb_to_recordset(%(rows)s::jsonb)
     AS x(queue text, ready bigint, in_flight bigint, delayed bigint, blocked bigint,
          dead bigint, sent bigint, acked bigint, capped boolean)
ORDER BY 1
ON CONFLICT (queue, slot) DO NOTHING;

-- name: levels_prune
DELETE FROM {schema}.levels WHERE slot < %(slot)s;

-- name: levels_read
SELECT queue, at, ready, in_flight, delayed, blocked, dead, sent, acked, capped
FROM {schema}.levels
WHERE slot >= %(slot)s AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
ORDER BY queue, slot;

-- name: figures_ready_first
-- A queue in deadline order (rule 41): its first ready messages in delivery order, one
-- range of the ready index, to size its pool (hailq/policy/scaling.py); no rows for a
-- queue in priority order.
SELECT m.priority, m.available_at, m.ordering_key FROM {schema}.messages AS m
WHERE m.queue = %(queue)s AND m.state = 'ready'
  AND EXISTS (SELECT 1 FROM {schema}.queues WHERE name = %(queue)s AND deadlines IS NOT NULL)
ORDER BY m.sort_key, m.seq
LIMIT %(n)s;

-- name: instance_found
-- Whether this database has hailq's schema (a caller's connection may reach any): a
-- statement that cannot fail, since a failed one would end the caller's transaction.
SELECT count(*) FROM pg_class WHERE oid = to_regclass('{schema}.instance');

-- name: instance_id
SELECT id FROM {schema}.instance;

-- History of finished messages (rule 40, migration 13). Acks write theirs themselves
-- (history_kept); these statements record dead and cancelled messages, search and prune.

-- name: history_record
-- One message that died or was cancelled, as history keeps it: if it was claimed while
-- its queue retained (its own retain) or the queue retains now (%(retain)s, 1 or 2 with
-- the body; 0 when it does not). history_recorded then clears its retain, so that its
-- later deletion (a purge, a redrive's next ack) is not taken for an ack.
INSERT INTO {schema}.history (id, queue, outcome, dedup_id, ordering_key, headers,
                              priority, body, body_kind, attempts, errors, consumer,
                              enqueued_at, started_at, finished_at)
SELECT id, queue, %(outcome)s, dedup_id, ordering_key, headers, priority,
       CASE WHEN (CASE WHEN retain > 0 THEN retain ELSE %(retain)s::smallint END) = 2
            THEN body END,
       body_kind, attempt, errors, consumer, enqueued_at, claimed_at,
       coalesce(dead_at, {schema}.epoch())
FROM {schema}.messages
WHERE id = %(id)s AND queue = %(queue)s AND (retain > 0 OR %(retain)s::smallint > 0);

-- name: history_recorded
UPDATE {schema}.messages SET retain = 0
WHERE id = %(id)s AND queue = %(queue)s AND retain > 0;

-- name: history_forget
-- Before an operator deletes live messages (a purge, a queue's deletion, one message by
-- id with %(id)s): no history for them, they were not acked.
UPDATE {schema}.messages SET retain = 0
WHERE queue = %(queue)s AND retain > 0 AND (%(id)s::text IS NULL OR id = %(id)s::text);

-- part: history_columns
id, queue, outcome, dedup_id, ordering_key, headers, priority, body, body_kind, attempts,
errors, consumer, enqueued_at, started_at, finished_at

-- part: history_filters
(%(queue)s::text IS NULL OR queue = %(queue)s::text)
  AND (%(outcome)s::text IS NULL OR outcome = %(outcome)s::text)
  AND (%(id)s::text IS NULL OR id = %(id)s::text)
  AND (%(dedup_id)s::text IS NULL OR dedup_id = %(dedup_id)s::text)
  AND (%(key)s::text IS NULL OR ordering_key = %(key)s::text)
  AND (%(since)s::float8 IS NULL OR finished_at >= %(since)s::float8)
  AND (%(until)s::float8 IS NULL OR finished_at < %(until)s::float8)
  AND (%(hname)s::text IS NULL OR headers::jsonb ->> %(hname)s::text = %(hvalue)s::text)

-- part: history_search
-- A search from the index of its most selective filter, $1 (backends/history.py).
SELECT {history_columns} FROM {schema}.history
WHERE $1 = %($2)s::text AND {history_filters}
ORDER BY finished_at DESC, seq DESC LIMIT %(limit)s

-- name: history_by_id
{history_search(id, id)};

-- name: history_by_dedup
{history_search(dedup_id, dedup_id)};

-- name: history_by_key
{history_search(ordering_key, key)};

-- name: history_by_queue
{history_search(queue, queue)};

-- name: history_recent
-- No indexed filter: the newest first, in the order they were written.
SELECT {history_columns} FROM {schema}.history
WHERE {history_filters}
ORDER BY seq DESC LIMIT %(limit)s;

-- name: history_prune
-- One bounded batch of a queue's rows older than its retention.
DELETE FROM {schema}.history WHERE seq = ANY(ARRAY(
    SELECT seq FROM {schema}.history
    WHERE queue = %(queue)s AND finished_at < {schema}.epoch() - %(keep)s
    ORDER BY finished_at LIMIT %(n)s));
-- name: maintenance_claim
-- A maintenance duty's turn (hailq/backends/upkeep.py): a row back if this call took it,
-- none if another process's turn is not over. A second claimer waits for the first's
-- row lock, then finds next_due moved on.
INSERT INTO {schema}.maintenance (duty, next_due, ran_at, ran_by, runs)
VALUES (%(duty)s, {schema}.epoch() + %(every)s, {schema}.epoch(), %(by)s, 1)
ON CONFLICT (duty) DO UPDATE SET next_due = excluded.next_due, ran_at = excluded.ran_at,
                                 ran_by = excluded.ran_by,
                                 runs = {schema}.maintenance.runs + 1
WHERE {schema}.maintenance.next_due <= {schema}.epoch()
RETURNING runs;

-- name: maintenance_list
SELECT duty, next_due, ran_at, ran_by, runs FROM {schema}.maintenance ORDER BY duty;
