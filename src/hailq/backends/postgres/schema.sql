-- columns: table.column type null default identity
autoscale seq bigint NO nextval('{schema}.autoscale_seq_seq'::regclass) NO
autoscale autoscaler text NO  NO
autoscale queue text NO  NO
autoscale host text NO  NO
autoscale pid integer NO  NO
autoscale at double precision NO  NO
autoscale workers integer NO  NO
autoscale desired integer NO  NO
autoscale decision text NO  NO
autoscale reason text NO  NO
autoscale ceiling integer YES  NO
autoscale minimum integer NO  NO
autoscale maximum integer NO  NO
autoscale throughput double precision YES  NO
autoscale handler_time double precision YES  NO
counters queue text NO  NO
counters shard integer NO  NO
counters sent bigint NO 0 NO
counters purged bigint NO 0 NO
counters nacked bigint NO 0 NO
counters redelivered bigint NO 0 NO
counters dead_lettered bigint NO 0 NO
counters late_acks bigint NO 0 NO
counters acked bigint NO 0 NO
deadline_pools queue text NO  NO
deadline_pools workers integer NO  NO
deadline_pools reason text YES  NO
deadline_pools at double precision NO  NO
dedup queue text NO  NO
dedup dedup_id text NO  NO
dedup message_id text NO  NO
dedup expires_at double precision NO  NO
desired_workers queue text YES  NO
desired_workers desired_workers integer YES  NO
desired_workers ready integer YES  NO
desired_workers in_flight integer YES  NO
desired_workers oldest_ready_age double precision YES  NO
desired_workers arrival_rate double precision YES  NO
desired_workers handler_time double precision YES  NO
desired_workers workers integer YES  NO
desired_workers concurrency integer YES  NO
desired_workers at double precision YES  NO
desired_workers rate_per_second double precision YES  NO
desired_workers ceiling integer YES  NO
desired_workers pool_at double precision YES  NO
desired_workers pool_reason text YES  NO
hailq_schema_version version integer NO  NO
hailq_schema_version name text NO  NO
hailq_schema_version applied_at timestamp with time zone NO now() NO
histograms queue text NO  NO
histograms kind text NO  NO
histograms priority smallint NO  NO
histograms le double precision NO  NO
histograms n bigint NO 0 NO
histograms total double precision NO 0 NO
history seq bigint NO  YES
history id text NO  NO
history queue text NO  NO
history outcome text NO  NO
history dedup_id text YES  NO
history ordering_key text YES  NO
history headers text YES  NO
history priority smallint NO  NO
history body bytea YES  NO
history body_kind smallint NO  NO
history attempts integer NO  NO
history errors jsonb YES  NO
history consumer text YES  NO
history enqueued_at double precision NO  NO
history started_at double precision YES  NO
history finished_at double precision NO  NO
instance one boolean NO true NO
instance id text NO  NO
levels queue text NO  NO
levels slot bigint NO  NO
levels at double precision NO  NO
levels ready bigint NO  NO
levels in_flight bigint NO  NO
levels delayed bigint NO  NO
levels blocked bigint NO  NO
levels dead bigint NO  NO
levels sent bigint NO  NO
levels acked bigint YES  NO
levels capped boolean NO  NO
maintenance duty text NO  NO
maintenance next_due double precision NO  NO
maintenance ran_at double precision NO  NO
maintenance ran_by text NO  NO
maintenance runs bigint NO  NO
messages seq bigint NO  YES
messages id text NO  NO
messages queue text NO  NO
messages state text NO  NO
messages body bytea NO  NO
messages body_kind smallint NO  NO
messages headers text YES  NO
messages priority smallint NO  NO
messages ordering_key text YES  NO
messages sort_key double precision NO  NO
messages attempt integer NO 0 NO
messages enqueued_at double precision NO  NO
messages available_at double precision NO  NO
messages lease_until double precision YES  NO
messages token text YES  NO
messages errors jsonb YES  NO
messages dead_at double precision YES  NO
messages parked boolean NO false NO
messages cancelled_at double precision YES  NO
messages retain smallint NO 0 NO
messages consumer text YES  NO
messages claimed_at double precision YES  NO
messages dedup_id text YES  NO
queue_ops name text NO  NO
queue_ops paused boolean NO false NO
queue_ops overrides text YES  NO
queue_ops updated_at double precision NO  NO
queues name text NO  NO
queues settings text NO  NO
queues created_at double precision NO  NO
queues lease double precision NO 30 NO
queues max_attempts integer NO 5 NO
queues max_in_flight integer YES  NO
queues aging double precision YES  NO
queues park boolean NO false NO
queues rate_per_second double precision YES  NO
queues burst double precision YES  NO
queues deadlines jsonb YES  NO
queues retry jsonb YES  NO
queues dedup_window double precision NO 3600 NO
queues max_message_size integer NO 1048576 NO
queues retain double precision YES  NO
queues retain_bodies boolean NO true NO
rate_buckets queue text NO  NO
rate_buckets tokens double precision NO  NO
rate_buckets refilled_at double precision NO  NO
rate_buckets taken integer NO 0 NO
rates queue text NO  NO
rates slot bigint NO  NO
rates priority smallint NO  NO
rates started bigint NO 0 NO
rates acked bigint NO 0 NO
rates failed bigint NO 0 NO
rates breaches bigint NO 0 NO
rates handler_total double precision NO 0 NO
rates redelivered bigint NO 0 NO
rates inbox bigint NO 0 NO
rates late_acks bigint NO 0 NO
samples queue text NO  NO
samples slot bigint NO  NO
samples at double precision NO  NO
samples sent bigint NO  NO
samples dead_lettered bigint NO  NO
samples acked bigint NO 0 NO
schedules name text NO  NO
schedules queue text NO  NO
schedules cron text YES  NO
schedules every double precision YES  NO
schedules timezone text NO 'UTC'::text NO
schedules catch_up integer NO 0 NO
schedules body bytea NO  NO
schedules body_kind integer NO  NO
schedules headers text YES  NO
schedules priority integer NO 0 NO
schedules source text NO  NO
schedules paused boolean NO false NO
schedules created_at double precision NO  NO
schedules declared_at double precision NO  NO
schedules last_slot double precision NO  NO
schedules fired_at double precision YES  NO
schedules fired bigint NO 0 NO
sends queue text NO  NO
sends slot bigint NO  NO
sends priority smallint NO  NO
sends shard integer NO  NO
sends sent bigint NO 0 NO
sketch_ranges queue text NO  NO
sketch_ranges kind text NO  NO
sketch_ranges priority smallint NO  NO
sketch_ranges slot bigint NO  NO
sketch_ranges n bigint NO 0 NO
sketch_ranges total double precision NO 0 NO
sketch_ranges lo double precision NO  NO
sketch_ranges hi double precision NO  NO
sketches queue text NO  NO
sketches kind text NO  NO
sketches priority smallint NO  NO
sketches slot bigint NO  NO
sketches bucket integer NO  NO
sketches n bigint NO 0 NO
subscriptions topic text NO  NO
subscriptions queue text NO  NO
subscriptions filter text YES  NO
subscriptions created_at double precision NO  NO
topics name text NO  NO
topics created_at double precision NO  NO
waiters queue text NO  NO
waiters waiter text NO  NO
waiters until double precision NO  NO
workers id text NO  NO
workers host text NO  NO
workers pid integer NO  NO
workers queues text NO  NO
workers concurrency integer NO  NO
workers in_flight integer NO  NO
workers started_at double precision NO  NO
workers last_seen double precision NO  NO
workers state text NO  NO
workers running text NO '[]'::text NO

-- indexes
CREATE INDEX autoscale_at ON {schema}.autoscale USING btree (at)
CREATE UNIQUE INDEX autoscale_pkey ON {schema}.autoscale USING btree (seq)
CREATE INDEX autoscale_queue ON {schema}.autoscale USING btree (queue, at)
CREATE UNIQUE INDEX counters_pkey ON {schema}.counters USING btree (queue, shard)
CREATE UNIQUE INDEX deadline_pools_pkey ON {schema}.deadline_pools USING btree (queue)
CREATE INDEX dedup_expires ON {schema}.dedup USING btree (expires_at)
CREATE UNIQUE INDEX dedup_pkey ON {schema}.dedup USING btree (queue, dedup_id)
CREATE UNIQUE INDEX hailq_schema_version_pkey ON {schema}.hailq_schema_version USING btree (version)
CREATE UNIQUE INDEX histograms_pkey ON {schema}.histograms USING btree (queue, kind, priority, le)
CREATE INDEX history_dedup ON {schema}.history USING btree (dedup_id) WHERE (dedup_id IS NOT NULL)
CREATE INDEX history_id ON {schema}.history USING btree (id)
CREATE INDEX history_key ON {schema}.history USING btree (ordering_key) WHERE (ordering_key IS NOT NULL)
CREATE UNIQUE INDEX history_pkey ON {schema}.history USING btree (seq)
CREATE INDEX history_queue ON {schema}.history USING btree (queue, finished_at)
CREATE UNIQUE INDEX instance_pkey ON {schema}.instance USING btree (one)
CREATE UNIQUE INDEX levels_pkey ON {schema}.levels USING btree (queue, slot)
CREATE INDEX levels_slot ON {schema}.levels USING btree (slot)
CREATE UNIQUE INDEX maintenance_pkey ON {schema}.maintenance USING btree (duty)
CREATE INDEX messages_dead ON {schema}.messages USING btree (queue, dead_at) WHERE (state = 'dead'::text)
CREATE INDEX messages_key ON {schema}.messages USING btree (queue, ordering_key, seq) WHERE (ordering_key IS NOT NULL)
CREATE INDEX messages_leased ON {schema}.messages USING btree (queue, lease_until) WHERE (state = 'leased'::text)
CREATE UNIQUE INDEX messages_pkey ON {schema}.messages USING btree (id)
CREATE INDEX messages_ready ON {schema}.messages USING btree (queue, sort_key, seq) WHERE (state = 'ready'::text)
CREATE INDEX messages_scheduled ON {schema}.messages USING btree (queue, available_at) WHERE (state = 'scheduled'::text)
CREATE UNIQUE INDEX queue_ops_pkey ON {schema}.queue_ops USING btree (name)
CREATE UNIQUE INDEX queues_pkey ON {schema}.queues USING btree (name)
CREATE UNIQUE INDEX rate_buckets_pkey ON {schema}.rate_buckets USING btree (queue)
CREATE UNIQUE INDEX rates_pkey ON {schema}.rates USING btree (queue, slot, priority)
CREATE INDEX rates_slot ON {schema}.rates USING btree (slot)
CREATE UNIQUE INDEX samples_pkey ON {schema}.samples USING btree (queue, slot)
CREATE INDEX samples_slot ON {schema}.samples USING btree (slot)
CREATE UNIQUE INDEX schedules_pkey ON {schema}.schedules USING btree (name)
CREATE UNIQUE INDEX sends_pkey ON {schema}.sends USING btree (queue, slot, priority, shard)
CREATE INDEX sends_slot ON {schema}.sends USING btree (slot)
CREATE UNIQUE INDEX sketch_ranges_pkey ON {schema}.sketch_ranges USING btree (queue, kind, priority, slot)
CREATE INDEX sketch_ranges_slot ON {schema}.sketch_ranges USING btree (slot)
CREATE UNIQUE INDEX sketches_pkey ON {schema}.sketches USING btree (queue, kind, priority, slot, bucket)
CREATE INDEX sketches_slot ON {schema}.sketches USING btree (slot)
CREATE UNIQUE INDEX subscriptions_pkey ON {schema}.subscriptions USING btree (topic, queue)
CREATE UNIQUE INDEX topics_pkey ON {schema}.topics USING btree (name)
CREATE UNIQUE INDEX waiters_pkey ON {schema}.waiters USING btree (queue, waiter)
CREATE UNIQUE INDEX workers_pkey ON {schema}.workers USING btree (id)

-- functions
backoff returns double precision
epoch returns double precision
sort_key returns double precision
wait_begin returns integer
wake returns void

-- triggers

-- sequences: name type start increment cycle
autoscale_seq_seq bigint 1 1 NO
fence bigint 1 1 NO
