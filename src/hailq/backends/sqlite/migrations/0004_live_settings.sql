-- The settings a statement obeys, as columns beside the settings' JSON: the claim, the
-- upkeep and the nack read them where they run, so an operator's change reaches running
-- consumers without a restart. The JSON stays the full record (retry, dedup window ...).
ALTER TABLE hailq_queues ADD COLUMN lease REAL NOT NULL DEFAULT 30.0;
ALTER TABLE hailq_queues ADD COLUMN max_attempts INTEGER NOT NULL DEFAULT 5;
ALTER TABLE hailq_queues ADD COLUMN max_in_flight INTEGER;
ALTER TABLE hailq_queues ADD COLUMN aging REAL;
ALTER TABLE hailq_queues ADD COLUMN park INTEGER NOT NULL DEFAULT 0;
UPDATE hailq_queues SET
    lease = coalesce(json_extract(settings, '$.lease'), 30.0),
    max_attempts = coalesce(json_extract(settings, '$.max_attempts'), 5),
    max_in_flight = json_extract(settings, '$.max_in_flight'),
    aging = json_extract(settings, '$.aging'),
    park = coalesce(json_extract(settings, '$.on_dead') = 'park', 0);
