-- hailq queries for SQLite. Parameters are named (:name); lists arrive as JSON arrays.
-- Times are epoch seconds of the broker's clock, passed as :now. hailq_sort_key is rule
-- 16's sort key (hailq/policy/ordering.py, registered on every connection).

-- name: queue_save
INSERT INTO hailq_queues (name, settings, created_at, lease, max_attempts, max_in_flight,
                          aging, park, deadlines, retry, dedup_window, max_message_size,
                          retain, retain_bodies)
VALUES (:name, :settings, :now, :lease, :max_attempts, :max_in_flight, :aging, :park,
        :deadlines, :retry, :dedup_window, :max_message_size, :retain, :retain_bodies)
{queue_columns_update};

-- name: queue_resort
-- A queue's aging, order or targets changed (its columns hold the new ones already): give
-- its live messages the keys they would have had under the new setting (rules 16, 41),
-- so old and new messages are ordered alike. Dead ones get theirs when redriven.
UPDATE hailq_messages
SET sort_key = hailq_sort_key(priority, available_at, q.aging,
                              json_extract(q.deadlines, '$[' || priority || ']'))
FROM (SELECT aging, deadlines FROM hailq_queues WHERE name = :queue) AS q
WHERE queue = :queue AND state <> 'dead';

-- name: queue_get
SELECT settings FROM hailq_queues WHERE name = :name;

-- name: queue_live
-- What a claim obeys, the pause included; no row: the queue does not exist (deleted).
SELECT q.lease, q.max_in_flight, q.max_attempts, q.park, coalesce(o.paused, 0),
       q.max_message_size, q.retain, q.retain_bodies
FROM hailq_queues AS q LEFT JOIN hailq_queue_ops AS o ON o.name = q.name
WHERE q.name = :queue;

-- name: queue_order
-- SQLite only: what a send's sort keys depend on (rules 16, 41) and its largest body,
-- read in the send's write transaction where they are applied (rule 39); no row: the
-- queue does not exist. PostgreSQL's message_insert joins the queue's row instead.
SELECT aging, deadlines, max_message_size FROM hailq_queues WHERE name = :queue;

-- name: queue_describe
-- Declared settings, operator overrides and pause of the queues named in :names (a JSON
-- array), or of every queue with :all.
SELECT q.name, q.settings, o.overrides, coalesce(o.paused, 0)
FROM hailq_queues AS q LEFT JOIN hailq_queue_ops AS o ON o.name = q.name
WHERE :all OR q.name IN (SELECT value FROM json_each(:names))
ORDER BY q.name;

-- name: queue_ops_get
SELECT overrides, paused FROM hailq_queue_ops WHERE name = :name;

-- name: queue_apply
-- The effective settings (declared overlaid by overrides) into the columns statements read.
UPDATE hailq_queues SET lease = :lease, max_attempts = :max_attempts,
    max_in_flight = :max_in_flight, aging = :aging, park = :park, deadlines = :deadlines,
    retry = :retry, dedup_window = :dedup_window, max_message_size = :max_message_size,
    retain = :retain, retain_bodies = :retain_bodies
WHERE name = :name;

-- name: queue_override
INSERT INTO hailq_queue_ops (name, overrides, updated_at) VALUES (:name, :overrides, :now)
ON CONFLICT (name) DO UPDATE SET overrides = excluded.overrides,
    updated_at = excluded.updated_at;

-- name: queue_pause
INSERT INTO hailq_queue_ops (name, paused, updated_at) VALUES (:name, :paused, :now)
ON CONFLICT (name) DO UPDATE SET paused = excluded.paused, updated_at = excluded.updated_at;

-- name: queue_messages_count
SELECT count(*) FROM hailq_messages WHERE queue = :queue;

-- name: queue_delete_messages
DELETE FROM hailq_messages WHERE queue = :queue;

-- name: queue_delete_dedup
-- With queue_delete_counters, _ops and _subscriptions: everything else a queue owns goes
-- with it (a subscription it is stops receiving copies; declared again, it starts anew).
DELETE FROM hailq_dedup WHERE queue = :queue;

-- name: queue_delete_counters
DELETE FROM hailq_counters WHERE queue = :queue;

-- name: queue_delete_ops
DELETE FROM hailq_queue_ops WHERE name = :queue;

-- name: queue_delete_subscriptions
DELETE FROM hailq_subscriptions WHERE queue = :queue;

-- name: queue_delete
DELETE FROM hailq_queues WHERE name = :queue;

-- name: queue_list
SELECT name, settings FROM hailq_queues ORDER BY name;

-- name: dedup_claim
-- The id that owns the dedup id (ours when it is new or the old one expired), and
-- whether this statement made the record (always: SQLite never re-runs a send). The
-- window is the queue's as stored now (rule 39).
INSERT INTO hailq_dedup (queue, dedup_id, message_id, expires_at)
VALUES (:queue, :dedup_id, :id, :now + coalesce(
    (SELECT dedup_window FROM hailq_queues WHERE name = :queue), 0))
ON CONFLICT (queue, dedup_id) DO UPDATE
SET message_id = CASE WHEN expires_at <= :now THEN excluded.message_id ELSE message_id END,
    expires_at = CASE WHEN expires_at <= :now THEN excluded.expires_at ELSE expires_at END
RETURNING message_id, 1;

-- name: dedup_prune
DELETE FROM hailq_dedup WHERE (queue, dedup_id) IN (
    SELECT queue, dedup_id FROM hailq_dedup WHERE expires_at <= :now LIMIT :limit
);

-- name: message_insert
-- After the caller found each queue of the send in this transaction (count_sent, and
-- queue_live first for several queues; SQLite's one writer means none is deleted
-- before the inserts): VALUES, not a probe of the queue inside every row's INSERT ...
-- SELECT, which cost half as much again a row. In order, one row at a time: a keyed
-- message waits (blocked) while its key has an earlier live or parked message, one of
-- the same batch included.
INSERT INTO hailq_messages (id, queue, state, body, body_kind, headers, priority,
                            ordering_key, sort_key, enqueued_at, available_at, dedup_id)
VALUES (:id, :queue,
        CASE
            WHEN :ordering_key IS NOT NULL AND EXISTS (
                SELECT 1 FROM hailq_messages k
                WHERE k.queue = :queue AND k.ordering_key = :ordering_key
                  AND (k.state <> 'dead' OR k.parked = 1)) THEN 'blocked'
            WHEN :delay > 0 THEN 'scheduled'
            ELSE 'ready'
        END,
        :body, :body_kind, :headers, :priority, :ordering_key, :sort_key,
        :now, :now + :delay, :dedup_id);

-- name: message_insert_rows
-- SQLite only: message_insert for messages without an ordering key, many rows in one
-- statement: {rows} stands for one (?, ..., ?) of eleven per message, whose state the
-- caller works out ('scheduled' with a delay, else 'ready'). A shared commit's group
-- in one statement cost a third less a row than message_insert run for each.
-- PostgreSQL's message_insert takes all its rows as arrays in one statement already.
INSERT INTO hailq_messages (id, queue, state, body, body_kind, headers, priority,
                            sort_key, enqueued_at, available_at, dedup_id)
VALUES {rows};

-- name: count_sent
-- SQLite only: it has no data-modifying WITH, so what PostgreSQL counts inside the
-- statement that changed the rows is a statement of its own here. It is also the send's
-- check that its queue still has a row, before the insert: nothing counted, the queue
-- was deleted (or never declared), and nothing is inserted.
INSERT INTO hailq_counters (queue, sent)
SELECT name, :n FROM hailq_queues WHERE name = :queue
ON CONFLICT (queue) DO UPDATE SET sent = sent + excluded.sent;

-- name: count_sent_priority
-- SQLite only, as count_sent: sends per priority per slot (rule 41: the arrival rates a
-- deadline queue is sized by), after count_sent found the queue.
INSERT INTO hailq_sends (queue, slot, priority, sent)
VALUES (:queue, CAST(:now / 10 AS INTEGER), :priority, :n)
ON CONFLICT (queue, slot, priority) DO UPDATE SET sent = sent + excluded.sent;

-- name: claimable
-- SQLite only: a cheap read between waits (PostgreSQL is woken by NOTIFY instead).
-- Is a claim worth a write transaction? :queues is a JSON array.
-- A paused queue is skipped: its ready messages must not wake the receiver (it would spin).
SELECT 1 FROM json_each(:queues) AS q
WHERE NOT EXISTS (SELECT 1 FROM hailq_queue_ops WHERE name = q.value AND paused = 1)
  AND (EXISTS (SELECT 1 FROM hailq_messages WHERE queue = q.value AND state = 'ready')
   OR EXISTS (SELECT 1 FROM hailq_messages
              WHERE queue = q.value AND state = 'scheduled' AND available_at <= :now)
   OR EXISTS (SELECT 1 FROM hailq_messages
              WHERE queue = q.value AND state = 'leased' AND lease_until <= :now))
LIMIT 1;

-- name: scheduled_promote
UPDATE hailq_messages SET state = 'ready'
WHERE queue = :queue AND state = 'scheduled' AND available_at <= :now;

-- name: leases_expire
-- An ended lease gives the message back, or kills it after its last attempt (rule 13),
-- as of the lease's end: reads show the same time and error before upkeep ran. A
-- cancelled message's ended lease (rule 40) marks it 'cancelled' instead, and the caller
-- removes it by the seq and id returned (message_cancel_remove).
UPDATE hailq_messages
{lease_end_state},
    -- In deadline order (rule 41) the deadline runs from the new available_at; priority
    -- order keeps the key (an aged message keeps its place).
    sort_key = CASE WHEN q.deadlines IS NULL THEN sort_key
                    ELSE lease_until + json_extract(q.deadlines, '$[' || priority || ']') END,
    parked = CASE WHEN cancelled_at IS NULL AND attempt >= q.max_attempts
                       AND ordering_key IS NOT NULL
                  THEN q.park ELSE 0 END,
    -- A retained attempt (rule 40) says who ran it since when; a cancelled one keeps
    -- the "cancelled" its cancel recorded.
    errors = CASE WHEN cancelled_at IS NOT NULL THEN errors
        ELSE json_insert(coalesce(errors, '[]'), '$[#]', json(CASE WHEN retain > 0
        THEN json_object('attempt', attempt, 'error', 'lease expired', 'at', lease_until,
                         'consumer', consumer, 'started', claimed_at)
        ELSE json_object('attempt', attempt, 'error', 'lease expired', 'at', lease_until)
        END)) END
FROM (SELECT coalesce((SELECT max_attempts FROM hailq_queues WHERE name = :queue), 5)
             AS max_attempts,
             coalesce((SELECT park FROM hailq_queues WHERE name = :queue), 0) AS park,
             (SELECT deadlines FROM hailq_queues WHERE name = :queue) AS deadlines) AS q
WHERE queue = :queue AND state = 'leased' AND lease_until <= :now
RETURNING state, ordering_key, parked, id, seq;

-- name: count_dead
INSERT INTO hailq_counters (queue, dead_lettered) VALUES (:queue, :n)
ON CONFLICT (queue) DO UPDATE SET dead_lettered = dead_lettered + excluded.dead_lettered;

-- name: in_flight
SELECT count(*) FROM hailq_messages WHERE queue = :queue AND state = 'leased';

-- name: message_claim
-- The claim's read: the next rows in rule 16's order, one range of the ready index, with
-- the values message_claim_mark gives them (one lease token for all of them, drawn by
-- the caller: a receipt still names one lease, and no row pays for random numbers of its
-- own). A read and then an update by position, inside the claim's write transaction, costs
-- a fifth fewer instructions than UPDATE ... RETURNING, which writes its rows to a
-- temporary table first and hands them back in no particular order. The last column is
-- the first row's fencing token (rule 41): the caller numbers the rest on from it and
-- moves the counter past them with fence_take.
SELECT id, :token, body, body_kind, headers, priority, ordering_key, attempt + 1,
       enqueued_at, :lease_until, seq, sort_key, available_at,
       (SELECT last FROM hailq_fence) + 1
FROM hailq_messages
WHERE queue = :queue AND state = 'ready'
ORDER BY sort_key, seq
LIMIT :n;

-- name: message_claim_mark
-- SQLite only: the second half of its claim (see message_claim). {marks} stands for one
-- ? per row read by message_claim; the parameters are the token, the lease's end, then
-- the rows' seqs.
UPDATE hailq_messages
SET state = 'leased', attempt = attempt + 1, token = ?, lease_until = ?
WHERE seq IN ({marks});

-- name: message_claim_mark_retain
-- SQLite only: message_claim_mark of a queue that keeps history (rule 40): whether and
-- how (1, 2: with the body), who runs this attempt and since when. The parameters are
-- the token, the lease's end, retain, the consumer and now, then the rows' seqs.
UPDATE hailq_messages
SET state = 'leased', attempt = attempt + 1, token = ?, lease_until = ?, retain = ?,
    consumer = ?, claimed_at = ?
WHERE seq IN ({marks});

-- name: message_claim_mark_slots
-- SQLite only: message_claim_mark_retain of a worker's claim, which names who runs each
-- row (rule 40: "worker host:pid slot 2"). {whens} stands for one "WHEN ? THEN ?" per
-- row (its seq, its name); the parameters are the token, the lease's end, retain, the
-- pairs, now, then the rows' seqs.
UPDATE hailq_messages
SET state = 'leased', attempt = attempt + 1, token = ?, lease_until = ?, retain = ?,
    consumer = CASE seq {whens} END, claimed_at = ?
WHERE seq IN ({marks});

-- name: fence_take
-- SQLite only: PostgreSQL draws each claimed row's fencing token from a sequence inside
-- its claim statement. Here the claim's write transaction moves the one counter past the
-- tokens message_claim read for its rows (rule 41). No RETURNING: message_claim read the
-- counter already, and a RETURNING stages its row in a temporary table.
UPDATE hailq_fence SET last = last + :n;

-- name: count_redelivered
-- SQLite only: it has no data-modifying WITH (PostgreSQL counts inside the statement).
INSERT INTO hailq_counters (queue, redelivered) VALUES (:queue, :n)
ON CONFLICT (queue) DO UPDATE SET redelivered = redelivered + excluded.redelivered;

-- name: message_ack_in_time
-- SQLite only: the common ack, a message whose lease still holds, needs nothing back
-- (RETURNING stages its rows in a temporary table: a page allocated and a fifth more
-- work per ack). A message with a key only where key_release_acked freed that key just
-- before (:keys_freed). No row changed: the caller asks message_ack_one what happened.
DELETE FROM hailq_messages
WHERE seq = :seq AND id = :id AND token = :token AND queue = :queue
  AND state = 'leased' AND lease_until >= :now AND (:keys_freed OR ordering_key IS NULL);

-- name: key_release_acked
-- SQLite only: key_release for the message message_ack_in_time is about to delete, in
-- the same transaction, so that a keyed ack needs no RETURNING either (see there). It
-- frees the next message of the key of the message this receipt still leases in time,
-- as if that message were gone already; the two statements match the same row or none.
-- No WITH, and OR instead of IN (...): either would build a temporary table per ack.
UPDATE hailq_messages
SET state = CASE WHEN available_at > :now THEN 'scheduled' ELSE 'ready' END
WHERE seq = (
    SELECT m.seq FROM hailq_messages AS m
    WHERE m.queue = :queue AND m.state = 'blocked' AND m.ordering_key = (
        SELECT a.ordering_key FROM hailq_messages AS a
        WHERE a.seq = :seq AND a.id = :id AND a.token = :token AND a.queue = :queue
          AND a.state = 'leased' AND a.lease_until >= :now)
    ORDER BY m.seq LIMIT 1
)
AND NOT EXISTS (
    SELECT 1 FROM hailq_messages AS m
    WHERE m.queue = :queue AND m.ordering_key = hailq_messages.ordering_key
      AND m.seq <> :seq
      AND (m.state = 'ready' OR m.state = 'scheduled' OR m.state = 'leased'
           OR (m.state = 'dead' AND m.parked = 1))
);

-- name: message_ack_one
-- Rows are found by position (seq); a receipt made before receipts named it is found by a
-- scan for its id (ids have no index: they cost every ack an index write).
DELETE FROM hailq_messages
WHERE seq = coalesce(:seq, (SELECT seq FROM hailq_messages WHERE id = :id))
  AND id = :id AND token = :token AND queue = :queue AND state <> 'blocked'
RETURNING id, token, ordering_key, state <> 'leased' OR lease_until < :now AS late;

-- name: count_late
-- SQLite only: it has no data-modifying WITH (PostgreSQL counts inside the statement).
INSERT INTO hailq_counters (queue, late_acks) VALUES (:queue, :n)
ON CONFLICT (queue) DO UPDATE SET late_acks = late_acks + excluded.late_acks;

-- name: count_purged
INSERT INTO hailq_counters (queue, purged) VALUES (:queue, :n)
ON CONFLICT (queue) DO UPDATE SET purged = purged + excluded.purged;

-- name: key_release
-- Release the next message of a key once nothing earlier holds it (rule 17). OR, not
-- IN (...): SQLite builds a temporary table for an IN list on every run.
UPDATE hailq_messages
SET state = CASE WHEN available_at > :now THEN 'scheduled' ELSE 'ready' END
WHERE seq = (
    SELECT seq FROM hailq_messages
    WHERE queue = :queue AND ordering_key = :key AND state = 'blocked'
    ORDER BY seq LIMIT 1
)
AND NOT EXISTS (
    SELECT 1 FROM hailq_messages
    WHERE queue = :queue AND ordering_key = :key
      AND (state = 'ready' OR state = 'scheduled' OR state = 'leased'
           OR (state = 'dead' AND parked = 1))
);

-- name: keys_release
-- key_release for several keys (a JSON array) in one statement.
UPDATE hailq_messages
SET state = CASE WHEN available_at > :now THEN 'scheduled' ELSE 'ready' END
WHERE seq IN (
    SELECT (SELECT m.seq FROM hailq_messages m
            WHERE m.queue = :queue AND m.ordering_key = k.value AND m.state = 'blocked'
            ORDER BY m.seq LIMIT 1)
    FROM json_each(:keys) AS k
    WHERE NOT EXISTS (
        SELECT 1 FROM hailq_messages m
        WHERE m.queue = :queue AND m.ordering_key = k.value
          AND (m.state = 'ready' OR m.state = 'scheduled' OR m.state = 'leased'
               OR (m.state = 'dead' AND m.parked = 1)))
);

-- name: message_ack
-- A batch of receipts: {marks} stands for one ? per receipt and {receipts} for one
-- (?, ?, ?) per receipt; the parameters are the seqs, then seq, id and token of each
-- receipt, then queue and now. The seqs find the rows; each row must then match one
-- receipt whole. (Matching seq, id and token each against the batch's lists is not
-- enough: one claim's messages share a token, so a stale receipt beside a current one
-- of the same claim would match.)
DELETE FROM hailq_messages
WHERE seq IN ({marks}) AND (seq, id, token) IN (VALUES {receipts})
  AND queue = ? AND state <> 'blocked'
RETURNING id, token, ordering_key, state <> 'leased' OR lease_until < ? AS late;

-- name: message_ack_claim_in_time
-- SQLite only: a batch of one claim's receipts (one lease token), all still leased in
-- time and without a key, unless keys_release_acked freed their keys just before (the
-- last parameter): nothing needs returning, so no row is staged for RETURNING.
-- {marks} stands for one ? per message; the parameters are the seqs, the token, the ids,
-- then queue, now and whether keys were freed. The caller compares the count of deleted
-- rows with the batch and, when they differ, rolls the transaction back and acks through
-- message_ack. A row that holds the token at one of the seqs is the message that claim
-- leased there (positions of live rows do not change, tokens are drawn per claim), and
-- its id must be one of the batch's. The unary + keeps the planner on the seqs instead
-- of the leased index.
DELETE FROM hailq_messages
WHERE seq IN ({marks}) AND token = ? AND id IN ({marks})
  AND queue = ? AND +state = 'leased' AND +lease_until >= ? AND (? OR ordering_key IS NULL);

-- name: keys_release_acked
-- SQLite only: key_release_acked for a batch of one claim, run just before
-- message_ack_claim_in_time: the next message of each key of the messages the batch
-- still leases in time is freed, as if those messages were gone already. The
-- parameters, in the order they appear: now, the seqs, the token, the ids, queue, now,
-- queue and the seqs again.
UPDATE hailq_messages
SET state = CASE WHEN available_at > ? THEN 'scheduled' ELSE 'ready' END
WHERE seq IN (
    SELECT (SELECT m.seq FROM hailq_messages AS m
            WHERE m.queue = a.queue AND m.ordering_key = a.ordering_key
              AND m.state = 'blocked'
            ORDER BY m.seq LIMIT 1)
    FROM hailq_messages AS a
    WHERE a.seq IN ({marks}) AND a.token = ? AND a.id IN ({marks}) AND a.queue = ?
      AND +a.state = 'leased' AND +a.lease_until >= ?
)
AND NOT EXISTS (
    SELECT 1 FROM hailq_messages AS m
    WHERE m.queue = ? AND m.ordering_key = hailq_messages.ordering_key
      AND m.seq NOT IN ({marks})
      AND (m.state = 'ready' OR m.state = 'scheduled' OR m.state = 'leased'
           OR (m.state = 'dead' AND m.parked = 1))
);

-- name: message_ack_pairs
-- SQLite only: receipts made before receipts named the row's position, a JSON array of
-- [id, token]. A scan (ids have no index); such receipts only live as long as a lease.
DELETE FROM hailq_messages
WHERE (id, token) IN (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]')
                      FROM json_each(:pairs))
  AND queue = :queue AND state <> 'blocked'
RETURNING id, token, ordering_key, state <> 'leased' OR lease_until < :now AS late;

-- name: message_nack
-- :spare (a give-back) never kills a message whose lease still holds; an ended lease of
-- the last attempt is a dead message's (rule 13), marked or not, so it is not found
-- (the receipt lost its lease) whatever the nack.
-- Without :delay the wait is the queue's retry backoff for the attempt, its policy read
-- from the queue's row here (rule 39), drawn once (its jitter is random).
UPDATE hailq_messages
SET state = CASE WHEN :dead OR (attempt >= q.max_attempts AND NOT :spare) THEN 'dead'
                 WHEN q.delay > 0 THEN 'scheduled' ELSE 'ready' END,
    dead_at = CASE WHEN :dead OR (attempt >= q.max_attempts AND NOT :spare) THEN :now END,
    parked = CASE WHEN (:dead OR (attempt >= q.max_attempts AND NOT :spare))
                       AND ordering_key IS NOT NULL
                  THEN q.park ELSE 0 END,
    available_at = :now + q.delay,
    sort_key = CASE WHEN (q.aging IS NULL AND q.deadlines IS NULL) OR :spare THEN sort_key
                    ELSE hailq_sort_key(priority, :now + q.delay, q.aging,
                        json_extract(q.deadlines, '$[' || priority || ']')) END,
    token = NULL,
    lease_until = NULL,
    -- A retained attempt (rule 40) says who ran it since when.
    errors = json_insert(coalesce(errors, '[]'), '$[#]', json(CASE WHEN retain > 0
        THEN json_object('attempt', attempt, 'error', :error, 'at', :now,
                         'consumer', consumer, 'started', claimed_at)
        ELSE json_object('attempt', attempt, 'error', :error, 'at', :now) END))
FROM (SELECT coalesce(max(max_attempts), 5) AS max_attempts, coalesce(max(park), 0) AS park,
             max(aging) AS aging, max(deadlines) AS deadlines,
             coalesce(:delay, hailq_backoff(max(retry), (
                 SELECT attempt FROM hailq_messages
                 WHERE seq = coalesce(:seq, (SELECT seq FROM hailq_messages WHERE id = :id))
             ))) AS delay
      FROM hailq_queues WHERE name = :queue) AS q
WHERE seq = coalesce(:seq, (SELECT seq FROM hailq_messages WHERE id = :id))
  AND id = :id AND queue = :queue AND token = :token AND state IN ('leased', 'ready')
  AND (lease_until >= :now OR attempt < q.max_attempts)
RETURNING state, ordering_key, parked;

-- name: count_nacked
-- SQLite only: it has no data-modifying WITH (PostgreSQL counts inside the statement).
INSERT INTO hailq_counters (queue, nacked, dead_lettered) VALUES (:queue, 1, :dead)
ON CONFLICT (queue) DO UPDATE SET nacked = nacked + 1,
    dead_lettered = dead_lettered + excluded.dead_lettered;

-- name: message_extend
-- An ended lease can be extended while nobody received the message since, unless it
-- ended on the last attempt: that message is dead (rule 13), whether or not upkeep has
-- marked it yet. Without :seconds, the queue's lease as its row holds it now (rule 39).
UPDATE hailq_messages SET state = 'leased', lease_until = :now + coalesce(
    :seconds, (SELECT lease FROM hailq_queues WHERE name = :queue), 30.0)
WHERE seq = coalesce(:seq, (SELECT seq FROM hailq_messages WHERE id = :id))
  AND id = :id AND queue = :queue AND token = :token AND state IN ('leased', 'ready')
  AND (lease_until >= :now
       OR attempt < coalesce((SELECT max_attempts FROM hailq_queues WHERE name = :queue), 5))
RETURNING lease_until;

-- name: message_peek
-- Each live message as the next receive would find it, without a write first: a due
-- scheduled message is ready, an ended lease gives its message back, and an ended lease
-- of the last attempt is a dead message's (rule 13), so it is not shown here.
WITH q AS (
    SELECT coalesce((SELECT max_attempts FROM hailq_queues WHERE name = :queue), 5)
           AS max_attempts
), live AS (
    SELECT m.id, CASE WHEN m.state = 'scheduled' AND m.available_at <= :now THEN 'ready'
                      WHEN m.state = 'leased' AND m.lease_until <= :now THEN 'ready'
                      ELSE m.state END AS state,
           m.body, m.body_kind, m.headers, m.priority, m.ordering_key, m.attempt,
           m.enqueued_at, CASE WHEN m.state = 'leased' AND m.lease_until <= :now
                               THEN m.lease_until ELSE m.available_at END AS available_at,
           m.sort_key, m.seq
    FROM hailq_messages AS m, q
    WHERE m.queue = :queue AND m.state <> 'dead'
      AND NOT (m.state = 'leased' AND m.lease_until <= :now AND m.attempt >= q.max_attempts)
)
SELECT id, state, body, body_kind, headers, priority, ordering_key, attempt,
       enqueued_at, available_at
FROM live
ORDER BY CASE state WHEN 'ready' THEN 0 WHEN 'scheduled' THEN 1 WHEN 'blocked' THEN 2 ELSE 3 END,
         sort_key, seq
LIMIT :limit;

-- name: dead_list
-- Dead messages, and the ones whose lease ended on their last attempt: dead by rule 13
-- already, shown as upkeep will mark them (same time, same "lease expired" entry).
WITH q AS (
    SELECT coalesce(max(max_attempts), 5) AS max_attempts, coalesce(max(park), 0) AS park
    FROM hailq_queues WHERE name = :queue
), dead AS (
    SELECT id, body, body_kind, headers, priority, ordering_key, attempt, enqueued_at,
           dead_at, errors, parked, seq
    FROM hailq_messages WHERE queue = :queue AND state = 'dead'
    UNION ALL
    SELECT m.id, m.body, m.body_kind, m.headers, m.priority, m.ordering_key, m.attempt,
           m.enqueued_at, m.lease_until,
           json_insert(coalesce(m.errors, '[]'), '$[#]', json_object(
               'attempt', m.attempt, 'error', 'lease expired', 'at', m.lease_until)),
           m.ordering_key IS NOT NULL AND q.park, m.seq
    FROM hailq_messages AS m, q
    WHERE m.queue = :queue AND m.state = 'leased' AND m.lease_until <= :now
      AND m.attempt >= q.max_attempts AND m.cancelled_at IS NULL
)
SELECT id, body, body_kind, headers, priority, ordering_key, attempt, enqueued_at,
       dead_at, errors, parked
FROM dead
WHERE (:ordering_key IS NULL OR ordering_key = :ordering_key)
  AND (:older_than IS NULL OR dead_at <= :now - :older_than)
  AND (:error IS NULL OR EXISTS (
      SELECT 1 FROM json_each(errors) AS e
      WHERE instr(json_extract(e.value, '$.error'), :error) > 0))
ORDER BY CASE WHEN :newest THEN dead_at END DESC, CASE WHEN :newest THEN seq END DESC,
         dead_at, seq
LIMIT :limit;

-- name: dead_keys
SELECT DISTINCT ordering_key FROM hailq_messages
WHERE queue = :queue AND state = 'dead' AND ordering_key IS NOT NULL
  AND (:all OR id IN (SELECT value FROM json_each(:ids)));

-- name: dead_redrive
-- Redriven keyed messages wait behind their key; key_release then frees the oldest.
UPDATE hailq_messages
SET state = CASE WHEN ordering_key IS NULL THEN 'ready' ELSE 'blocked' END,
    attempt = 0, parked = 0, dead_at = NULL, token = NULL, lease_until = NULL,
    available_at = :now,
    sort_key = hailq_sort_key(priority, :now, q.aging,
                              json_extract(q.deadlines, '$[' || priority || ']'))
FROM (SELECT max(aging) AS aging, max(deadlines) AS deadlines
      FROM hailq_queues WHERE name = :queue) AS q
WHERE queue = :queue AND state = 'dead' AND (:all OR id IN (SELECT value FROM json_each(:ids)));

-- name: purge_dead
DELETE FROM hailq_messages WHERE queue = :queue AND state = 'dead'
RETURNING ordering_key, parked;

-- name: purge_live
DELETE FROM hailq_messages WHERE queue = :queue AND state <> 'dead';

-- name: stats
-- One statement, one snapshot, each count served by its state's partial index; counted as
-- the next receive would find them (a read writes nothing): due scheduled messages are
-- ready, ended leases ready again or, after the last attempt, dead (rule 13).
-- acked = sent - present - purged. The clock comes last.
WITH q AS (
    SELECT coalesce((SELECT max_attempts FROM hailq_queues WHERE name = :queue), 5)
           AS max_attempts
)
SELECT r.n + d.n + e.n - k.n, s.n - d.n, l.n - e.n, b.n, x.n + k.n,
       (SELECT min(enqueued_at) FROM hailq_messages
        WHERE queue = :queue AND (state = 'ready'
                                  OR (state = 'scheduled' AND available_at <= :now)
                                  OR (state = 'leased' AND lease_until <= :now
                                      AND attempt < (SELECT max_attempts FROM q)))),
       r.n + s.n + l.n + b.n + x.n,
       c.sent, c.purged, c.nacked, c.redelivered, coalesce(c.dead_lettered, 0) + k.n,
       c.late_acks, :now
FROM (SELECT count(*) AS n FROM hailq_messages WHERE queue = :queue AND state = 'ready') AS r,
     (SELECT count(*) AS n FROM hailq_messages WHERE queue = :queue AND state = 'scheduled') AS s,
     (SELECT count(*) AS n FROM hailq_messages
      WHERE queue = :queue AND state = 'scheduled' AND available_at <= :now) AS d,
     (SELECT count(*) AS n FROM hailq_messages WHERE queue = :queue AND state = 'leased') AS l,
     (SELECT count(*) AS n FROM hailq_messages
      WHERE queue = :queue AND state = 'leased' AND lease_until <= :now) AS e,
     (SELECT count(*) AS n FROM hailq_messages
      WHERE queue = :queue AND state = 'leased' AND lease_until <= :now
        AND attempt >= (SELECT max_attempts FROM q)) AS k,
     (SELECT count(*) AS n FROM hailq_messages
      WHERE queue = :queue AND ordering_key IS NOT NULL AND state = 'blocked') AS b,
     (SELECT count(*) AS n FROM hailq_messages WHERE queue = :queue AND state = 'dead') AS x
LEFT JOIN hailq_counters AS c ON c.queue = :queue;

-- name: stats_parked
SELECT DISTINCT ordering_key FROM hailq_messages
WHERE queue = :queue AND ordering_key IS NOT NULL
  AND ((state = 'dead' AND parked = 1)
       OR (state = 'leased' AND lease_until <= :now
           AND (SELECT park = 1 AND attempt >= max_attempts
                FROM hailq_queues WHERE name = :queue)))
ORDER BY ordering_key;

-- name: topic_save
INSERT INTO hailq_topics (name, created_at) VALUES (:name, :now) ON CONFLICT (name) DO NOTHING;

-- name: topic_get
SELECT name FROM hailq_topics WHERE name = :name;

-- name: topic_delete
DELETE FROM hailq_topics WHERE name = :name;

-- name: topic_subscriptions_delete
DELETE FROM hailq_subscriptions WHERE topic = :name;

-- name: topic_list
SELECT name FROM hailq_topics ORDER BY name;

-- name: subscription_save
INSERT INTO hailq_subscriptions (topic, queue, filter, created_at)
VALUES (:topic, :queue, :filter, :now)
ON CONFLICT (topic, queue) DO UPDATE SET filter = excluded.filter;

-- name: subscription_list
SELECT topic, queue, filter FROM hailq_subscriptions WHERE topic = :topic ORDER BY queue;

-- name: subscription_delete
DELETE FROM hailq_subscriptions WHERE topic = :topic AND queue = :queue;

-- name: message_get
-- One message by id, as stored, with what its state as the next receive would find it
-- depends on (the queue's attempts and dead-letter policy, the clock). Ids have no
-- index here (it would cost every ack a write): an operator's look scans the queue.
SELECT m.id, m.state, m.body, m.body_kind, m.headers, m.priority, m.ordering_key,
       m.attempt, m.enqueued_at, m.available_at, m.lease_until, m.dead_at, m.errors,
       m.parked, coalesce(q.max_attempts, 5), coalesce(q.park, 0), :now, m.cancelled_at
FROM hailq_messages AS m LEFT JOIN hailq_queues AS q ON q.name = m.queue
WHERE m.queue = :queue AND m.id = :id;

-- name: message_delete
-- One message by id, whatever its state (a leased one's consumer then gets LeaseLost).
DELETE FROM hailq_messages WHERE queue = :queue AND id = :id
RETURNING ordering_key;

-- name: message_locate
-- The queue of a live message, by id alone (an operator's cancel without a queue). Ids
-- have no index here: a read that scans, as message_get does, and blocks no writer.
SELECT queue FROM hailq_messages WHERE id = :id AND state <> 'dead' LIMIT 1;

-- name: message_cancel_find
-- Rule 40: the message to cancel, after upkeep settled its queue (a due delay is ready,
-- an ended lease returned or dead). Ids have no index here: an operator's cancel scans
-- the queue, as message_delete does.
SELECT seq, id, state, ordering_key, cancelled_at FROM hailq_messages
WHERE queue = :queue AND id = :id;

-- name: message_cancel_running
-- A running message is marked, not removed: it keeps its lease, so its max_in_flight
-- slot and its ordering key, until its handler has stopped or its lease has ended. Its
-- token gets a prefix no receipt has: every ack, nack and extend of it is refused; the
-- settle of the cancelled lease (message_cancelled) still finds it. The attempt records
-- "cancelled".
UPDATE hailq_messages
SET token = 'cancelled:' || token, cancelled_at = :now,
    errors = json_insert(coalesce(errors, '[]'), '$[#]',
                         json_object('attempt', attempt, 'error', 'cancelled', 'at', :now))
WHERE seq = :seq AND id = :id AND state = 'leased' AND cancelled_at IS NULL;

-- name: message_cancelled
-- Of these leases (:leases, a JSON array of [seq, id, token]; seq may be null), the
-- messages an operator cancelled: a worker's poll of its messages in flight, and the
-- settle of a cancelled message whose handler stopped. By position: a direct probe each.
SELECT m.seq, m.id, m.ordering_key
FROM json_each(:leases) AS l
JOIN hailq_messages AS m
  ON m.seq = coalesce(json_extract(l.value, '$[0]'),
                      (SELECT seq FROM hailq_messages WHERE id = json_extract(l.value, '$[1]')))
 AND m.id = json_extract(l.value, '$[1]')
 AND m.token = 'cancelled:' || json_extract(l.value, '$[2]')
WHERE m.queue = :queue AND m.cancelled_at IS NOT NULL;

-- name: message_cancel_remove
-- Rule 40: a cancelled message leaves (waiting: at once; running: once its handler has
-- stopped or its lease has ended). :seqs and :ids are JSON arrays of the same rows.
DELETE FROM hailq_messages
WHERE seq IN (SELECT value FROM json_each(:seqs))
  AND id IN (SELECT value FROM json_each(:ids)) AND queue = :queue;

-- name: worker_save
-- ``running``: what each slot runs now, as JSON [[id, queue, attempt, since], ...].
INSERT INTO hailq_workers (id, host, pid, queues, concurrency, in_flight, started_at,
                           last_seen, state, running)
VALUES (:id, :host, :pid, :queues, :concurrency, :in_flight, :started_at, :now, :state,
        :running)
ON CONFLICT (id) DO UPDATE SET queues = excluded.queues, in_flight = excluded.in_flight,
    concurrency = excluded.concurrency, last_seen = excluded.last_seen, state = excluded.state,
    running = excluded.running;

-- name: worker_list
SELECT id, host, pid, queues, concurrency, in_flight, started_at, last_seen, state, running
FROM hailq_workers ORDER BY started_at, id;

-- name: worker_prune
DELETE FROM hailq_workers WHERE id IN (
    SELECT id FROM hailq_workers WHERE last_seen < :before LIMIT :limit);

-- name: rate_take
-- Rule 33: a claim of a rate-limited queue takes min(:n, whole tokens) from the queue's
-- bucket, refilled at :rate tokens a second up to :burst, in the claim's transaction;
-- returns how many it took. A new bucket starts full. Every SET reads the old row.
INSERT INTO hailq_rate_buckets (queue, tokens, refilled_at, taken)
VALUES (:queue, :burst - min(:n, CAST(:burst AS INTEGER)), :now,
        min(:n, CAST(:burst AS INTEGER)))
ON CONFLICT (queue) DO UPDATE SET
    taken = min(:n, CAST(min(:burst, tokens + max(0.0, :now - refilled_at) * :rate)
                         AS INTEGER)),
    tokens = min(:burst, tokens + max(0.0, :now - refilled_at) * :rate)
             - min(:n, CAST(min(:burst, tokens + max(0.0, :now - refilled_at) * :rate)
                            AS INTEGER)),
    refilled_at = max(refilled_at, :now)
RETURNING taken;

-- name: rate_return
-- Tokens a claim took but found no message for go back, in the same transaction.
UPDATE hailq_rate_buckets SET tokens = tokens + :n WHERE queue = :queue;

-- name: rate_due
-- Seconds until the next whole token of each rate-limited queue among :queues (0 or less:
-- one is there): a limited receiver sleeps that long instead of polling.
SELECT b.queue,
       (1.0 - min(q.burst, b.tokens + max(0.0, :now - b.refilled_at) * q.rate_per_second))
       / q.rate_per_second
FROM hailq_rate_buckets AS b JOIN hailq_queues AS q ON q.name = b.queue
WHERE b.queue IN (SELECT value FROM json_each(:queues)) AND q.rate_per_second IS NOT NULL;

-- name: queue_rate_save
-- A queue's rate limit as columns the claim reads (NULL: unlimited).
UPDATE hailq_queues SET rate_per_second = :rate, burst = :burst WHERE name = :name;

-- name: queue_rate
SELECT rate_per_second, burst FROM hailq_queues WHERE name = :queue;

-- name: schedule_save
-- Rule 35: declare a schedule, or update its definition. A new one starts with its
-- creation time as its last slot, so slots from before it existed never fire; an
-- existing one keeps its last slot, its pause and its counts.
INSERT INTO hailq_schedules (name, queue, cron, every, timezone, catch_up, body, body_kind,
                             headers, priority, source, created_at, declared_at, last_slot)
VALUES (:name, :queue, :cron, :every, :timezone, :catch_up, :body, :body_kind, :headers,
        :priority, :source, :now, :now, :now)
ON CONFLICT (name) DO UPDATE SET queue = excluded.queue, cron = excluded.cron,
    every = excluded.every, timezone = excluded.timezone, catch_up = excluded.catch_up,
    body = excluded.body, body_kind = excluded.body_kind, headers = excluded.headers,
    priority = excluded.priority, source = excluded.source,
    declared_at = max(declared_at, excluded.declared_at);

-- name: schedule_declare
-- A running scheduler still declares these (its app's app.periodic): see "declared".
UPDATE hailq_schedules SET declared_at = max(declared_at, :now)
WHERE name IN (SELECT value FROM json_each(:names));

-- name: schedule_list
SELECT name, queue, cron, every, timezone, catch_up, body, body_kind, headers, priority,
       source, paused, created_at, declared_at, last_slot, fired_at, fired
FROM hailq_schedules ORDER BY name;

-- name: schedule_fire
-- Claim slots: only the scheduler that saw last_slot as it is moves it, in the
-- transaction that sends the slots' messages, so each slot is sent once however many
-- schedulers run.
UPDATE hailq_schedules SET last_slot = :slot, fired_at = :now, fired = fired + :n
WHERE name = :name AND last_slot = :seen AND last_slot < :slot AND paused = 0;

-- name: schedule_pause
-- A resumed schedule skips the slots of its pause: it goes on from now.
UPDATE hailq_schedules SET paused = :paused,
    last_slot = CASE WHEN :paused THEN last_slot ELSE max(last_slot, :now) END
WHERE name = :name;

-- name: schedule_delete
DELETE FROM hailq_schedules WHERE name = :name;

-- name: figures_histogram_add
-- Figures (rule 25), written by a worker's recorder once a second: the buckets of wait
-- and handler-time histograms grow by what the process saw since its last flush, all of
-- a flush in one statement (JSON rows; le null for the last bucket).
INSERT INTO hailq_histograms (queue, kind, priority, le, n, total)
SELECT json_extract(value, '$.queue'), json_extract(value, '$.kind'),
       json_extract(value, '$.priority'), COALESCE(json_extract(value, '$.le'), 9e999),
       json_extract(value, '$.n'), json_extract(value, '$.total')
FROM json_each(:rows) WHERE true
ON CONFLICT (queue, kind, priority, le) DO UPDATE
SET n = n + excluded.n, total = total + excluded.total;

-- name: figures_rate_add
-- This 10-second slot's claims, acks, failures, breaches, handler seconds, redeliveries
-- inbox runs and late acks grow, for every (queue, priority) of the flush in one statement.
INSERT INTO hailq_rates (queue, slot, priority, started, acked, failed, breaches,
                         handler_total, redelivered, inbox, late_acks)
SELECT json_extract(value, '$.queue'), CAST(:now / 10 AS INTEGER),
       json_extract(value, '$.priority'), json_extract(value, '$.started'),
       json_extract(value, '$.acked'), json_extract(value, '$.failed'),
       json_extract(value, '$.breaches'), json_extract(value, '$.handler_total'),
       json_extract(value, '$.redelivered'), json_extract(value, '$.inbox'),
       json_extract(value, '$.late_acks')
FROM json_each(:rows) WHERE true
ON CONFLICT (queue, slot, priority) DO UPDATE
SET started = started + excluded.started, acked = acked + excluded.acked,
    failed = failed + excluded.failed, breaches = breaches + excluded.breaches,
    handler_total = handler_total + excluded.handler_total,
    redelivered = redelivered + excluded.redelivered, inbox = inbox + excluded.inbox,
    late_acks = late_acks + excluded.late_acks;

-- name: figures_sketch_add
-- Rule 36: the log buckets (hailq/observe/sketch.py) of this 10-second slot's waits and
-- handler times grow, all of a flush in one statement.
INSERT INTO hailq_sketches (queue, kind, priority, slot, bucket, n)
SELECT json_extract(value, '$.queue'), json_extract(value, '$.kind'),
       json_extract(value, '$.priority'), CAST(:now / 10 AS INTEGER),
       json_extract(value, '$.bucket'), json_extract(value, '$.n')
FROM json_each(:rows) WHERE true
ON CONFLICT (queue, kind, priority, slot, bucket) DO UPDATE SET n = n + excluded.n;

-- name: figures_range_add
-- Each sketch's count, sum, minimum and maximum in this slot (percentiles are clamped
-- into the observed range).
INSERT INTO hailq_sketch_ranges (queue, kind, priority, slot, n, total, lo, hi)
SELECT json_extract(value, '$.queue'), json_extract(value, '$.kind'),
       json_extract(value, '$.priority'), CAST(:now / 10 AS INTEGER),
       json_extract(value, '$.n'), json_extract(value, '$.total'),
       json_extract(value, '$.lo'), json_extract(value, '$.hi')
FROM json_each(:rows) WHERE true
ON CONFLICT (queue, kind, priority, slot) DO UPDATE
SET n = n + excluded.n, total = total + excluded.total, lo = min(lo, excluded.lo),
    hi = max(hi, excluded.hi);

-- name: figures_count_acked
-- Acks counted per queue as flushed (rates of acks over the same span as sends); a queue
-- deleted meanwhile gets no counter row back.
INSERT INTO hailq_counters (queue, acked)
SELECT json_extract(value, '$.queue'), json_extract(value, '$.n')
FROM json_each(:rows) WHERE EXISTS (SELECT 1 FROM hailq_queues
                                    WHERE name = json_extract(value, '$.queue'))
ON CONFLICT (queue) DO UPDATE SET acked = acked + excluded.acked;

-- name: figures_sample
-- The queue's counters as of now, the last sample of each second kept: rates of sends,
-- acks and deaths over one span without a write per send.
INSERT INTO hailq_samples (queue, slot, at, sent, dead_lettered, acked)
SELECT :queue, CAST(:now AS INTEGER), :now, coalesce(sum(sent), 0),
       coalesce(sum(dead_lettered), 0), coalesce(sum(acked), 0)
FROM hailq_counters WHERE queue = :queue
ON CONFLICT (queue, slot) DO UPDATE
SET at = excluded.at, sent = excluded.sent, dead_lettered = excluded.dead_lettered,
    acked = excluded.acked;

-- name: figures_prune_rates
-- Rate slots are kept a day (hailq doctor's longest window) and a minute; each prune
-- deletes at most :limit rows, a range of the slot index.
DELETE FROM hailq_rates WHERE (queue, slot, priority) IN (
    SELECT queue, slot, priority FROM hailq_rates
    WHERE slot < CAST(:now / 10 AS INTEGER) - 8646 LIMIT :limit);

-- name: figures_prune_sends
-- Sends per priority are kept an hour (the longest rate window) and a minute.
DELETE FROM hailq_sends WHERE (queue, slot, priority) IN (
    SELECT queue, slot, priority FROM hailq_sends
    WHERE slot < CAST(:now / 10 AS INTEGER) - 366 LIMIT :limit);

-- name: figures_prune_sketches
-- Sketches are kept an hour (the longest window of percentiles) and a minute.
DELETE FROM hailq_sketches WHERE (queue, kind, priority, slot, bucket) IN (
    SELECT queue, kind, priority, slot, bucket FROM hailq_sketches
    WHERE slot < CAST(:now / 10 AS INTEGER) - 366 LIMIT :limit);

-- name: figures_prune_ranges
DELETE FROM hailq_sketch_ranges WHERE (queue, kind, priority, slot) IN (
    SELECT queue, kind, priority, slot FROM hailq_sketch_ranges
    WHERE slot < CAST(:now / 10 AS INTEGER) - 366 LIMIT :limit);

-- name: figures_prune_samples
-- Samples are kept an hour and a minute, and the newest of each queue always: the
-- counters a later rate starts from.
DELETE FROM hailq_samples WHERE (queue, slot) IN (
    SELECT queue, slot FROM hailq_samples AS s
    WHERE slot < CAST(:now AS INTEGER) - 3660
      AND slot < (SELECT max(slot) FROM hailq_samples WHERE queue = s.queue)
    LIMIT :limit);

-- name: figures_histograms
SELECT kind, priority, le, n, total FROM hailq_histograms
WHERE queue = :queue ORDER BY kind, priority, le;

-- name: figures_rates
-- The last hour and a slot, per slot and priority.
SELECT slot, priority, started, acked, failed, breaches, handler_total, redelivered, inbox,
       late_acks
FROM hailq_rates
WHERE queue = :queue AND slot >= CAST((:now - :long) / 10 AS INTEGER)
ORDER BY slot, priority;

-- name: figures_sends
-- Sends per slot and priority over the last hour and a slot (rule 41).
SELECT slot, priority, sent
FROM hailq_sends
WHERE queue = :queue AND slot >= CAST((:now - :long) / 10 AS INTEGER)
ORDER BY slot, priority;

-- name: figures_window
-- hailq doctor's window (rule 26): the slots since :since, the one holding it included.
SELECT slot, priority, started, acked, failed, breaches, handler_total, redelivered, inbox,
       late_acks
FROM hailq_rates
WHERE queue = :queue AND slot >= CAST(:since / 10 AS INTEGER)
ORDER BY slot, priority;

-- name: figures_sketches
-- The sketch buckets of the short (window 0) and the long window (1), summed over slots.
SELECT 0, kind, priority, bucket, sum(n) FROM hailq_sketches
WHERE queue = :queue AND slot >= CAST((:now - :short) / 10 AS INTEGER)
GROUP BY kind, priority, bucket
UNION ALL
SELECT 1, kind, priority, bucket, sum(n) FROM hailq_sketches
WHERE queue = :queue AND slot >= CAST((:now - :long) / 10 AS INTEGER)
GROUP BY kind, priority, bucket;

-- name: figures_ranges
SELECT 0, kind, priority, sum(n), sum(total), min(lo), max(hi) FROM hailq_sketch_ranges
WHERE queue = :queue AND slot >= CAST((:now - :short) / 10 AS INTEGER)
GROUP BY kind, priority
UNION ALL
SELECT 1, kind, priority, sum(n), sum(total), min(lo), max(hi) FROM hailq_sketch_ranges
WHERE queue = :queue AND slot >= CAST((:now - :long) / 10 AS INTEGER)
GROUP BY kind, priority;

-- name: figures_points
-- Where each rate window (:w0, :w1, :w2 seconds) starts (hailq/observe/figures.py): the
-- last sample at or before its start (0), and the first after it (1).
WITH w(w) AS (VALUES (:w0), (:w1), (:w2))
SELECT w.w, 0, s.at, s.sent, s.dead_lettered, s.acked
FROM w JOIN hailq_samples AS s ON s.queue = :queue AND s.slot = (
    SELECT max(slot) FROM hailq_samples
    WHERE queue = :queue AND slot <= CAST(:now - w.w AS INTEGER))
UNION ALL
SELECT w.w, 1, s.at, s.sent, s.dead_lettered, s.acked
FROM w JOIN hailq_samples AS s ON s.queue = :queue AND s.slot = (
    SELECT min(slot) FROM hailq_samples
    WHERE queue = :queue AND slot > CAST(:now - w.w AS INTEGER));

-- name: figures_queue
-- When the queue was made (its counters start then) and its acks as flushed so far.
SELECT q.created_at, coalesce((SELECT sum(acked) FROM hailq_counters WHERE queue = q.name), 0)
FROM hailq_queues AS q WHERE q.name = :queue;

-- name: overview_queues
-- The dashboard's overview (hailq/backends/overview.py): every queue in one statement,
-- one row each. Each count stops at :cap rows (the caller passes its limit + 1, so a
-- count of :cap reads "more than the limit"): each is a range of its state's partial
-- index, so a million messages cost what a few thousand do. Counted as ``stats`` counts
-- them (due delays ready, ended leases ready or dead). The oldest ready message of a
-- queue with strict priority is exact: per priority the first row of its range of the
-- ready index by seq (ids and seq grow with time); with aging or in deadline order, the
-- oldest of the first :cap in delivery order.
WITH p(p) AS (VALUES (0), (1), (2), (3), (4), (5), (6), (7), (8), (9))
SELECT q.name, q.settings, o.overrides, coalesce(o.paused, 0),
       (SELECT count(*) FROM (SELECT 1 FROM hailq_messages
                              WHERE queue = q.name AND state = 'ready' LIMIT :cap)),
       (SELECT count(*) FROM (SELECT 1 FROM hailq_messages
                              WHERE queue = q.name AND state = 'scheduled' LIMIT :cap)),
       (SELECT count(*) FROM (SELECT 1 FROM hailq_messages
                              WHERE queue = q.name AND state = 'scheduled'
                                AND available_at <= :now LIMIT :cap)),
       (SELECT count(*) FROM (SELECT 1 FROM hailq_messages
                              WHERE queue = q.name AND state = 'leased' LIMIT :cap)),
       (SELECT count(*) FROM (SELECT 1 FROM hailq_messages
                              WHERE queue = q.name AND state = 'leased'
                                AND lease_until <= :now LIMIT :cap)),
       (SELECT count(*) FROM (SELECT 1 FROM hailq_messages
                              WHERE queue = q.name AND state = 'leased'
                                AND lease_until <= :now AND attempt >= q.max_attempts
                              LIMIT :cap)),
       (SELECT count(*) FROM (SELECT 1 FROM hailq_messages
                              WHERE queue = q.name AND ordering_key IS NOT NULL
                                AND state = 'blocked' LIMIT :cap)),
       (SELECT count(*) FROM (SELECT 1 FROM hailq_messages
                              WHERE queue = q.name AND state = 'dead' LIMIT :cap)),
       (SELECT min(e) FROM (
            SELECT (SELECT m.enqueued_at FROM hailq_messages AS m
                    WHERE m.queue = q.name AND m.state = 'ready' AND m.sort_key = -p.p
                    ORDER BY m.seq LIMIT 1) AS e
            FROM p WHERE q.aging IS NULL AND q.deadlines IS NULL
            UNION ALL
            SELECT min(enqueued_at) FROM (SELECT enqueued_at FROM hailq_messages
                                          WHERE queue = q.name AND state = 'ready'
                                            AND (q.aging IS NOT NULL
                                                 OR q.deadlines IS NOT NULL)
                                          ORDER BY sort_key, seq LIMIT :cap)
            UNION ALL
            SELECT min(enqueued_at) FROM (SELECT enqueued_at FROM hailq_messages
                                          WHERE queue = q.name AND state = 'scheduled'
                                            AND available_at <= :now LIMIT :cap)
            UNION ALL
            SELECT min(enqueued_at) FROM (SELECT enqueued_at FROM hailq_messages
                                          WHERE queue = q.name AND state = 'leased'
                                            AND lease_until <= :now
                                            AND attempt < q.max_attempts LIMIT :cap))),
       coalesce(c.sent, 0), coalesce(c.dead_lettered, 0), coalesce(c.purged, 0),
       q.created_at, coalesce(c.acked, 0), :now
FROM hailq_queues AS q
LEFT JOIN hailq_queue_ops AS o ON o.name = q.name
LEFT JOIN hailq_counters AS c ON c.queue = q.name
ORDER BY q.name;

-- name: overview_histograms
-- Every queue's wait histograms (what breaches and percentiles are made of).
SELECT queue, kind, priority, le, n, total FROM hailq_histograms
ORDER BY queue, kind, priority, le;

-- name: overview_rates
SELECT queue, slot, priority, started, acked, failed, breaches, handler_total, redelivered,
       inbox, late_acks
FROM hailq_rates WHERE slot >= CAST((:now - :short) / 10 AS INTEGER)
ORDER BY queue, slot, priority;

-- name: overview_sketches
-- Every queue's sketch buckets of the short window (the overview shows that one only).
SELECT queue, kind, priority, bucket, sum(n) FROM hailq_sketches
WHERE slot >= CAST((:now - :short) / 10 AS INTEGER)
GROUP BY queue, kind, priority, bucket;

-- name: overview_ranges
SELECT queue, kind, priority, sum(n), sum(total), min(lo), max(hi) FROM hailq_sketch_ranges
WHERE slot >= CAST((:now - :short) / 10 AS INTEGER)
GROUP BY queue, kind, priority;

-- name: overview_dead_count
-- How many dead letters ``dead_list`` would list with these filters, counting at most
-- :cap (the dashboard's confirmation of a bulk action says how many it touches).
WITH q AS (
    SELECT coalesce(max(max_attempts), 5) AS max_attempts
    FROM hailq_queues WHERE name = :queue
)
SELECT count(*) FROM (
    SELECT 1 FROM (
        SELECT dead_at, errors, ordering_key FROM hailq_messages
        WHERE queue = :queue AND state = 'dead'
        UNION ALL
        SELECT m.lease_until,
               json_insert(coalesce(m.errors, '[]'), '$[#]', json_object(
                   'attempt', m.attempt, 'error', 'lease expired', 'at', m.lease_until)),
               m.ordering_key
        FROM hailq_messages AS m, q
        WHERE m.queue = :queue AND m.state = 'leased' AND m.lease_until <= :now
          AND m.attempt >= q.max_attempts
    ) AS dead
    WHERE (:ordering_key IS NULL OR ordering_key = :ordering_key)
      AND (:older_than IS NULL OR dead_at <= :now - :older_than)
      AND (:error IS NULL OR EXISTS (
          SELECT 1 FROM json_each(errors) AS e
          WHERE instr(json_extract(e.value, '$.error'), :error) > 0))
    LIMIT :cap
);

-- name: autoscale_record
-- Rule 24: one decision of an autoscaler, on the database's clock.
INSERT INTO hailq_autoscale (autoscaler, queue, host, pid, at, workers, desired, decision,
                             reason, ceiling, minimum, maximum, throughput, handler_time)
VALUES (:autoscaler, :queue, :host, :pid, :now, :workers, :desired, :decision, :reason,
        :ceiling, :minimum, :maximum, :throughput, :handler_time);

-- name: autoscale_prune
DELETE FROM hailq_autoscale WHERE rowid IN (
    SELECT rowid FROM hailq_autoscale WHERE at < :now - :keep LIMIT :limit);

-- name: autoscale_list
-- The last decisions, newest first, of one queue's autoscalers (or every queue's).
SELECT autoscaler, queue, host, pid, workers, desired, decision, reason, at, ceiling,
       minimum, maximum, throughput, handler_time
FROM hailq_autoscale
WHERE (:queue IS NULL OR queue = :queue) AND at >= :since
ORDER BY seq DESC LIMIT :limit;

-- name: autoscale_latest
-- The last decision of each autoscaler seen since :since, by queue.
SELECT autoscaler, queue, host, pid, workers, desired, decision, reason, at, ceiling,
       minimum, maximum, throughput, handler_time
FROM hailq_autoscale
WHERE seq IN (SELECT max(seq) FROM hailq_autoscale WHERE at >= :since
              AND (:queue IS NULL OR queue = :queue) GROUP BY autoscaler)
ORDER BY queue, autoscaler;

-- name: levels_now
-- Queue levels over time (hailq/backends/levels.py): the clock a slot is taken on.
SELECT :now;

-- name: levels_taken
-- Whether some process recorded this slot already (it then counts nothing).
SELECT 1 FROM hailq_levels WHERE slot = :slot LIMIT 1;

-- name: levels_add
-- One slot's levels of every queue; a row some other process wrote first stays.
INSERT INTO hailq_levels (queue, slot, at, ready, in_flight, delayed, blocked, dead, sent,
                          acked, capped)
SELECT json_extract(value, '$.queue'), :slot, :at, json_extract(value, '$.ready'),
       json_extract(value, '$.in_flight'), json_extract(value, '$.delayed'),
       json_extract(value, '$.blocked'), json_extract(value, '$.dead'),
       json_extract(value, '$.sent'), json_extract(value, '$.acked'),
       json_extract(value, '$.capped')
FROM json_each(:rows) WHERE true
ON CONFLICT (queue, slot) DO NOTHING;

-- name: levels_prune
DELETE FROM hailq_levels WHERE slot < :slot;

-- name: levels_read
SELECT queue, at, ready, in_flight, delayed, blocked, dead, sent, acked, capped
FROM hailq_levels
WHERE slot >= :slot AND (:queue IS NULL OR queue = :queue)
ORDER BY queue, slot;

-- name: figures_ready_first
-- A queue in deadline order (rule 41): its first ready messages in delivery order, one
-- range of the ready index, to size its pool (hailq/policy/scaling.py); no rows for a
-- queue in priority order.
SELECT m.priority, m.available_at, m.ordering_key FROM hailq_messages AS m
WHERE m.queue = :queue AND m.state = 'ready'
  AND EXISTS (SELECT 1 FROM hailq_queues WHERE name = :queue AND deadlines IS NOT NULL)
ORDER BY m.sort_key, m.seq
LIMIT :n;

-- name: instance_found
-- Whether this database has hailq's instance id (a caller's connection may reach any).
SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'hailq_instance';

-- name: instance_id
SELECT id FROM hailq_instance;

-- History of finished messages (rule 40, migration 15). Acks write theirs in a trigger;
-- these statements record dead and cancelled messages, search and prune.

-- name: history_record
-- One message that died or was cancelled, as history keeps it: if it was claimed while
-- its queue retained (its own retain) or the queue retains now (:retain, 1 or 2 with
-- the body; 0 when it does not). history_recorded then clears its retain, so that its
-- later deletion (a purge, a redrive's next ack) is not taken for an ack.
INSERT INTO hailq_history (id, queue, outcome, dedup_id, ordering_key, headers, priority,
                           body, body_kind, attempts, errors, consumer, enqueued_at,
                           started_at, finished_at)
SELECT id, queue, :outcome, dedup_id, ordering_key, headers, priority,
       CASE WHEN (CASE WHEN retain > 0 THEN retain ELSE :retain END) = 2 THEN body END,
       body_kind, attempt, errors, consumer, enqueued_at, claimed_at, coalesce(dead_at, :now)
FROM hailq_messages
WHERE seq = coalesce(:seq, (SELECT seq FROM hailq_messages WHERE id = :id))
  AND id = :id AND queue = :queue AND (retain > 0 OR :retain > 0);

-- name: history_recorded
UPDATE hailq_messages SET retain = 0
WHERE seq = coalesce(:seq, (SELECT seq FROM hailq_messages WHERE id = :id))
  AND id = :id AND queue = :queue AND retain > 0;

-- name: history_forget
-- Before an operator deletes live messages (a purge, a queue's deletion, one message by
-- id with :id): no history for them, they were not acked.
UPDATE hailq_messages SET retain = 0
WHERE queue = :queue AND retain > 0 AND (:id IS NULL OR id = :id);

-- part: history_columns
id, queue, outcome, dedup_id, ordering_key, headers, priority, body, body_kind, attempts,
errors, consumer, enqueued_at, started_at, finished_at

-- part: history_filters
(:queue IS NULL OR queue = :queue) AND (:outcome IS NULL OR outcome = :outcome)
  AND (:id IS NULL OR id = :id) AND (:dedup_id IS NULL OR dedup_id = :dedup_id)
  AND (:key IS NULL OR ordering_key = :key)
  AND (:since IS NULL OR finished_at >= :since) AND (:until IS NULL OR finished_at < :until)
  AND (:hname IS NULL OR EXISTS (SELECT 1 FROM json_each(headers)
                                  WHERE key = :hname AND value = :hvalue))

-- part: history_search
-- A search from the index of its most selective filter, $1 (backends/history.py), and
-- through the rows acks wrote since the last settle (history_settle): those are read in
-- full, a few hundred at most while upkeep keeps up.
SELECT {history_columns} FROM (
    SELECT * FROM (SELECT {history_columns}, seq, 0 AS fresh FROM hailq_history
                   WHERE $1 = :$2 AND {history_filters}
                   ORDER BY finished_at DESC, seq DESC LIMIT :limit)
    UNION ALL
    SELECT * FROM (SELECT {history_columns}, seq, 1 AS fresh FROM hailq_history_fresh
                   WHERE $1 = :$2 AND {history_filters}
                   ORDER BY finished_at DESC, seq DESC LIMIT :limit))
ORDER BY finished_at DESC, fresh DESC, seq DESC LIMIT :limit

-- name: history_by_id
{history_search(id, id)};

-- name: history_by_dedup
{history_search(dedup_id, dedup_id)};

-- name: history_by_key
{history_search(ordering_key, key)};

-- name: history_by_queue
{history_search(queue, queue)};

-- name: history_recent
-- No indexed filter: the newest first, each table read in the order it was written.
SELECT {history_columns} FROM (
    SELECT * FROM (SELECT {history_columns}, seq, 0 AS fresh FROM hailq_history
                   WHERE {history_filters} ORDER BY seq DESC LIMIT :limit)
    UNION ALL
    SELECT * FROM (SELECT {history_columns}, seq, 1 AS fresh FROM hailq_history_fresh
                   WHERE {history_filters} ORDER BY seq DESC LIMIT :limit))
ORDER BY finished_at DESC, fresh DESC, seq DESC LIMIT :limit;

-- name: history_fresh_top
-- SQLite only (as history_settle): the last of the first :n rows acks wrote into
-- hailq_history_fresh (NULL when there is none): history_settle moves them,
-- history_settled deletes them.
SELECT max(seq) FROM (SELECT seq FROM hailq_history_fresh ORDER BY seq LIMIT :n);

-- name: history_settle
-- SQLite only: its history trigger writes unindexed rows (migration 19); PostgreSQL's
-- ack statements write history where it is searched.
INSERT INTO hailq_history ({history_columns})
SELECT {history_columns} FROM hailq_history_fresh WHERE seq <= :top ORDER BY seq;

-- name: history_settled
-- SQLite only (as history_settle): the rows just moved.
DELETE FROM hailq_history_fresh WHERE seq <= :top;

-- name: history_prune
-- One bounded batch of a queue's rows older than its retention.
DELETE FROM hailq_history WHERE seq IN (
    SELECT seq FROM hailq_history WHERE queue = :queue AND finished_at < :now - :keep
    ORDER BY finished_at LIMIT :n);
-- name: maintenance_claim
-- A maintenance duty's turn (hailq/backends/upkeep.py): a row back if this call took it,
-- none if another process's turn is not over.
INSERT INTO hailq_maintenance (duty, next_due, ran_at, ran_by, runs)
VALUES (:duty, :now + :every, :now, :by, 1)
ON CONFLICT (duty) DO UPDATE SET next_due = excluded.next_due, ran_at = excluded.ran_at,
                                 ran_by = excluded.ran_by, runs = runs + 1
WHERE hailq_maintenance.next_due <= :now
RETURNING runs;

-- name: maintenance_list
SELECT duty, next_due, ran_at, ran_by, runs FROM hailq_maintenance ORDER BY duty;
