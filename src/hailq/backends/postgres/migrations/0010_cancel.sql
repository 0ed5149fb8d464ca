-- hailq schema version 10 (PostgreSQL): cancel by id (rule 40). A running message an
-- operator cancelled keeps its row, state and lease (so it keeps its max_in_flight slot
-- and its ordering key) until its handler has stopped or its lease has ended; its token
-- is cleared, so no receipt acks, nacks or extends it any more, and cancelled_at says
-- when it was cancelled (a worker polls it for its messages in flight).
ALTER TABLE {schema}.messages ADD COLUMN cancelled_at double precision;
