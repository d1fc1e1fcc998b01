-- concurrency slots (queue, resource, per key) and start-rate limits
\getenv abs_srcdir PG_ABS_SRCDIR
\i :abs_srcdir/sql/include/fresh_extension.sql
\set VERBOSITY sqlstate

-- a queue limit of 2: never more than 2 running, whatever max_jobs asks
SELECT job_state.create_queue('lim', concurrency_limit => 2, retry_interval => '0', jitter => 'none');
SELECT count(*) FROM (SELECT job_state.submit('lim', jsonb_build_object('n', i)) FROM generate_series(1, 6) i) s;
CREATE TABLE lt AS SELECT token, job_id FROM job_state.claim('lim', 'w', max_jobs => 5);
SELECT count(*) AS claimed FROM lt;
SELECT count(*) AS more FROM job_state.claim('lim', 'w', max_jobs => 5);
SELECT kind, scope, n, job_id IS NOT NULL AS held FROM job_state.slot ORDER BY kind, scope, n;
-- every way out of running frees the slot
SELECT job_state.succeed(token) FROM lt WHERE job_id = (SELECT min(job_id) FROM lt);
INSERT INTO lt SELECT token, job_id FROM job_state.claim('lim', 'w', max_jobs => 5);
SELECT count(*) AS running FROM job_state.job WHERE queue = 'lim' AND status = 'running';
SELECT job_state.fail(token, 'transient') FROM lt WHERE job_id = (SELECT max(job_id) FROM lt);
INSERT INTO lt SELECT token, job_id FROM job_state.claim('lim', 'w', max_jobs => 5);
SELECT count(*) AS running FROM job_state.job WHERE queue = 'lim' AND status = 'running';
UPDATE job_state.job SET lease_expires_at = clock_timestamp() - interval '1 s' WHERE queue = 'lim' AND status = 'running';
SELECT job_state.sweep() AS expired;
SELECT count(*) AS held FROM job_state.slot WHERE job_id IS NOT NULL;
SELECT count(*) AS after_expiry FROM job_state.claim('lim', 'w', max_jobs => 5);
SELECT job_state.cancel(id) FROM job_state.job WHERE queue = 'lim' AND status = 'running';
SELECT job_state.fail(token, 'permanent') FROM job_state.claim('lim', 'w') c;
SELECT count(*) AS held FROM job_state.slot WHERE job_id IS NOT NULL;
-- raising the limit adds slots; lowering it stops using the extra ones
SELECT job_state.alter_queue('lim', concurrency_limit => 3);
SELECT count(*) AS slots FROM job_state.slot WHERE scope = 'lim';
SELECT count(*) AS claimed_with_3 FROM job_state.claim('lim', 'w', max_jobs => 10);
SELECT job_state.alter_queue('lim', concurrency_limit => 1);
SELECT job_state.fail(c.token, 'permanent') FROM job_state.claim('lim', 'w') c;

-- a resource shared by two queues: at most 2 running across both
SELECT job_state.create_resource('model-x', 2);
SELECT job_state.create_queue('qa');
SELECT job_state.create_queue('qb');
SELECT count(*) FROM (SELECT job_state.submit(q, jsonb_build_object('n', i), resource => 'model-x')
                        FROM generate_series(1, 3) i, unnest(ARRAY['qa', 'qb']) q) s;
SELECT job_id FROM job_state.submit('qa', '{"free": true}');
SELECT count(*) AS qa_claimed FROM job_state.claim('qa', 'w', max_jobs => 10);
SELECT count(*) AS qb_claimed FROM job_state.claim('qb', 'w', max_jobs => 10);
SELECT resource, count(*) FROM job_state.job WHERE status = 'running' GROUP BY resource ORDER BY resource;
-- errors
SELECT job_state.create_resource('model-x', 2);
SELECT job_state.create_resource('', 2);
SELECT job_state.create_resource('r', 0);
SELECT job_state.create_resource('r', NULL);
SELECT job_state.create_resource('r', NULL, 0);
SELECT job_state.create_resource(NULL, 1);

-- per-key limit: one running job per customer, no key rows to create first
SELECT job_state.create_queue('per', per_key_limit => 1);
SELECT count(*) FROM (SELECT job_state.submit('per', jsonb_build_object('n', i), concurrency_key => 'user-' || (i % 2))
                        FROM generate_series(1, 6) i) s;
SELECT job_id FROM job_state.submit('per', '{"no": "key"}');
SELECT concurrency_key, count(*) FROM job_state.claim('per', 'w', max_jobs => 10) c
  JOIN job_state.job j ON j.id = c.job_id GROUP BY 1 ORDER BY 1;
SELECT count(*) AS more FROM job_state.claim('per', 'w', max_jobs => 10);
SELECT job_state.succeed(c.token) FROM job_state.claim('per', 'w') c;

-- start rate: a token bucket, one start every 2 s (burst: 1)
SELECT job_state.create_resource('slow-api', NULL, 0.5);
SELECT job_state.create_queue('rate');
SELECT count(*) FROM (SELECT job_state.submit('rate', jsonb_build_object('n', i), resource => 'slow-api')
                        FROM generate_series(1, 10) i) s;
SELECT count(*) AS burst FROM job_state.claim('rate', 'w', max_jobs => 10);
SELECT count(*) AS right_after FROM job_state.claim('rate', 'w', max_jobs => 10);
-- as if 10 s had passed: the bucket holds at most its burst
UPDATE job_state.bucket SET refilled_at = refilled_at - interval '10 s' WHERE resource = 'slow-api';
SELECT count(*) AS ten_seconds_later FROM job_state.claim('rate', 'w', max_jobs => 10);
-- a faster bucket: 5 per second, a burst of 5
SELECT job_state.create_resource('fast-api', NULL, 5);
SELECT job_state.create_queue('rate5');
SELECT count(*) FROM (SELECT job_state.submit('rate5', jsonb_build_object('n', i), resource => 'fast-api')
                        FROM generate_series(1, 10) i) s;
SELECT count(*) AS burst5 FROM job_state.claim('rate5', 'w', max_jobs => 10);
-- the bucket is split into shards: the burst, one second's worth of whole
-- starts (at least 1), dealt out among up to 32 shards, each refilling at
-- its share of the rate; a resource without a rate has none
SELECT job_state.create_resource('both', 1, 100);
SELECT r.name, r.max_starts_per_second, count(b.n) AS shards, sum(b.per_second) AS per_second,
       sum(b.burst) AS burst, string_agg(b.burst::text, ',' ORDER BY b.n) AS bursts,
       sum(b.tokens) = sum(b.burst) AS full
  FROM job_state.resource r LEFT JOIN job_state.bucket b ON b.resource = r.name
 GROUP BY r.name, r.max_starts_per_second ORDER BY r.name;
-- one claim goes round all shards: the burst of 5 above came from 5
-- shards; spent tokens stay spent when the rate changes (the new shards
-- share what the old ones held), and the new burst is 20
SELECT job_state.alter_resource('fast-api', max_starts_per_second => 20.5);
SELECT count(*) AS shards, round(sum(per_second)::numeric, 6) AS per_second, sum(burst) AS burst,
       string_agg(burst::text, ',' ORDER BY n) AS bursts, sum(tokens) < 1 AS still_spent
  FROM job_state.bucket WHERE resource = 'fast-api';
SELECT count(*) FROM (SELECT job_state.submit('rate5', jsonb_build_object('more', i), resource => 'fast-api')
                        FROM generate_series(1, 30) i) s;
SELECT count(*) AS right_after_alter FROM job_state.claim('rate5', 'w', max_jobs => 40);
UPDATE job_state.bucket SET refilled_at = refilled_at - interval '10 s' WHERE resource = 'fast-api';
SELECT count(*) AS burst20 FROM job_state.claim('rate5', 'w', max_jobs => 40);
-- a claim that finds no token passes the empty shards without locking them
-- (nor writing them): their versions are unchanged
CREATE TEMP TABLE shard_versions AS
  SELECT n, ctid AS was_ctid, xmax AS was_xmax FROM job_state.bucket WHERE resource = 'slow-api';
SELECT count(*) AS nothing FROM job_state.claim('rate', 'w', max_jobs => 10);
SELECT count(*) AS untouched FROM job_state.bucket b
  JOIN shard_versions v ON v.n = b.n AND v.was_ctid = b.ctid AND v.was_xmax = b.xmax
 WHERE b.resource = 'slow-api';
-- and once every shard was empty it passes the resource's other jobs
-- without locking them: of the waiting jobs only the first one each claim
-- tried was ever locked (a row lock leaves xmax set)
SELECT count(*) FILTER (WHERE xmax <> '0') AS ever_locked, count(*) AS waiting
  FROM job_state.job WHERE queue = 'rate' AND status = 'accepted';
-- so does it for every such resource of the call: jobs alternating
-- between two resources, one start every 100 s each; the claim takes one
-- job of each, then locks only the next job of each
SELECT job_state.create_resource('dry-a', NULL, 0.01);
SELECT job_state.create_resource('dry-b', NULL, 0.01);
SELECT job_state.create_queue('alt');
SELECT count(*) FROM (SELECT job_state.submit('alt', jsonb_build_object('n', i),
                                              resource => CASE WHEN i % 2 = 1 THEN 'dry-a' ELSE 'dry-b' END)
                        FROM generate_series(1, 8) i) s;
SELECT count(*) AS started FROM job_state.claim('alt', 'w', max_jobs => 10);
SELECT count(*) FILTER (WHERE xmax <> '0') AS ever_locked, count(*) AS waiting
  FROM job_state.job WHERE queue = 'alt' AND status = 'accepted';
-- raw SQL: the rate set by hand makes the shards too, and one removed
-- takes them away (the jobs then start without a token)
UPDATE job_state.resource SET max_starts_per_second = 3 WHERE name = 'fast-api';
SELECT count(*) AS shards, sum(per_second) AS per_second, sum(burst) AS burst
  FROM job_state.bucket WHERE resource = 'fast-api';
UPDATE job_state.resource SET max_starts_per_second = NULL WHERE name = 'fast-api';
SELECT count(*) AS shards FROM job_state.bucket WHERE resource = 'fast-api';
SELECT count(*) AS unrated FROM job_state.claim('rate5', 'w', max_jobs => 40);
-- a resource deleted takes its shards with it
SELECT job_state.create_resource('passing', NULL, 4);
SELECT count(*) AS shards FROM job_state.bucket WHERE resource = 'passing';
DELETE FROM job_state.resource WHERE name = 'passing';
SELECT count(*) AS shards_left FROM job_state.bucket WHERE resource = 'passing';

-- a limited queue judges its jobs as claim does elsewhere: a job past its
-- deadline or out of attempts is failed with the reason and holds no slot;
-- the slot taken for it goes to the next job, which holds it
SELECT job_state.create_queue('lim_used', concurrency_limit => 1);
SELECT job_id AS lu1 FROM job_state.submit('lim_used', '{"n": 1}', deadline => clock_timestamp() + interval '50 ms') \gset
SELECT job_id AS lu2 FROM job_state.submit('lim_used', '{"n": 2}', max_attempts => 1) \gset
SELECT job_id AS lu3 FROM job_state.submit('lim_used', '{"n": 3}') \gset
UPDATE job_state.job SET attempts = 1 WHERE id = :lu2;
SELECT pg_sleep(0.1);
SELECT job_id = :lu3 AS third_started FROM job_state.claim('lim_used', 'w', max_jobs => 3);
SELECT id = :lu1 AS first, status, reason, queue_slot FROM job_state.job
 WHERE queue = 'lim_used' ORDER BY id;
SELECT job_id = :lu3 AS held_by_third FROM job_state.slot WHERE scope = 'lim_used';

-- a limit set or raised after jobs were submitted applies to them: the
-- slots follow the queue's limits, by alter_queue or raw SQL alike
SELECT job_state.create_queue('lim_late');
SELECT count(*) FROM (SELECT job_state.submit('lim_late', '{}', concurrency_key => 'c')
						FROM generate_series(1, 5)) s;
SELECT job_state.alter_queue('lim_late', per_key_limit => 2);
SELECT count(*) AS started_at_key_limit_2 FROM job_state.claim('lim_late', 'w', max_jobs => 5);
SELECT job_state.alter_queue('lim_late', per_key_limit => 3);
SELECT count(*) AS one_more_at_3 FROM job_state.claim('lim_late', 'w', max_jobs => 5);
UPDATE job_state.queue SET per_key_limit = 4 WHERE name = 'lim_late';
SELECT count(*) AS one_more_at_4 FROM job_state.claim('lim_late', 'w', max_jobs => 5);
SELECT count(*) AS key_slots, count(job_id) AS held FROM job_state.slot
 WHERE scope = 'lim_late' AND kind = 'key';
-- a lowered limit leaves the slots above it unused
SELECT job_state.alter_queue('lim_late', per_key_limit => 1);
SELECT count(*) AS slots_kept FROM job_state.slot WHERE scope = 'lim_late' AND kind = 'key';
-- a queue limit set by raw SQL on a queue with waiting jobs
SELECT job_state.create_queue('lim_late2');
SELECT count(*) FROM (SELECT job_state.submit('lim_late2', '{}') FROM generate_series(1, 3)) s;
UPDATE job_state.queue SET concurrency_limit = 2 WHERE name = 'lim_late2';
SELECT count(*) AS started_at_limit_2 FROM job_state.claim('lim_late2', 'w', max_jobs => 3);
-- jobs already running when a limit is set take slots too, so the limit
-- counts them; leaving running frees those slots as any other.  Running
-- jobs beyond the new limit get none (here: 3 running, key limit 2), so
-- until they finish the limit is exceeded by that many
SELECT job_state.create_queue('lim_run');
SELECT count(*) FROM (SELECT job_state.submit('lim_run', '{}', concurrency_key => 'c')
						FROM generate_series(1, 6)) s;
SELECT array_agg(token ORDER BY job_id) AS run_tokens
  FROM job_state.claim('lim_run', 'w', max_jobs => 2) \gset
SELECT job_state.alter_queue('lim_run', concurrency_limit => 3);
SELECT count(*) AS one_more_of_3 FROM job_state.claim('lim_run', 'w', max_jobs => 6);
UPDATE job_state.queue SET per_key_limit = 2 WHERE name = 'lim_run';
SELECT kind, count(job_id) AS held FROM job_state.slot WHERE scope = 'lim_run'
 GROUP BY kind ORDER BY kind;
SELECT count(queue_slot) AS queue_slots, count(key_slot) AS key_slots
  FROM job_state.job WHERE queue = 'lim_run' AND status = 'running';
-- each job records the number of the slot it holds
SELECT count(*) AS recorded FROM job_state.job j JOIN job_state.slot s
    ON s.job_id = j.id AND s.scope = j.queue
   AND s.n = CASE s.kind WHEN 'queue' THEN j.queue_slot ELSE j.key_slot END
 WHERE j.queue = 'lim_run' AND j.status = 'running';
SELECT job_state.succeed((:'run_tokens'::job_state.claim_token[])[1]);
SELECT count(*) AS one_for_the_freed_slot FROM job_state.claim('lim_run', 'w', max_jobs => 6);
SELECT job_state.succeed((:'run_tokens'::job_state.claim_token[])[2]);
SELECT count(*) AS one_more_for_the_next FROM job_state.claim('lim_run', 'w', max_jobs => 6);
SELECT count(*) FILTER (WHERE kind = 'queue') AS queue_held,
	   count(*) FILTER (WHERE kind = 'key') AS key_held
  FROM job_state.slot WHERE scope = 'lim_run' AND job_id IS NOT NULL;
-- jobs passed over for a full key never hide the ones behind them: claim
-- reads on, a page at a time, past 40 waiting jobs of a key at its limit
-- to the job of another key
SELECT job_state.create_queue('lim_deep', per_key_limit => 1);
SELECT count(*) FROM (SELECT job_state.submit('lim_deep', jsonb_build_object('i', i),
												concurrency_key => 'busy')
						FROM generate_series(1, 41) i) s;
SELECT job_id AS other_key_job FROM job_state.submit('lim_deep', '{"other": 1}',
													 concurrency_key => 'other') \gset
SELECT count(*) AS first_of_busy FROM job_state.claim('lim_deep', 'w');
SELECT job_id = :other_key_job AS the_other_key FROM job_state.claim('lim_deep', 'w');
SELECT count(*) AS nothing_left_to_start FROM job_state.claim('lim_deep', 'w', max_jobs => 5);
-- from the head too (claim_rescan_interval 0: every claim starts there)
SET job_state.claim_rescan_interval = 0;
SELECT job_id AS third_key_job FROM job_state.submit('lim_deep', '{"third": 1}',
													 concurrency_key => 'third') \gset
SELECT job_id = :third_key_job AS found_from_the_head FROM job_state.claim('lim_deep', 'w');
RESET job_state.claim_rescan_interval;

-- taking and freeing a slot are HOT updates (no indexed column changes):
-- five rounds of two claims and completions, each job holding a queue and
-- a key slot, are 40 slot updates and add no index entry
SELECT job_state.create_queue('lim_hot', concurrency_limit => 2, per_key_limit => 1);
SELECT count(*) FROM (SELECT job_state.submit('lim_hot', jsonb_build_object('i', i),
											  concurrency_key => 'k' || i % 2)
						FROM generate_series(1, 10) i) s;
SELECT pg_stat_force_next_flush();
SELECT n_tup_upd AS upd0, n_tup_hot_upd AS hot0 FROM pg_stat_user_tables
 WHERE relid = 'job_state.slot'::regclass \gset
SELECT count(job_state.succeed(token)) FROM job_state.claim('lim_hot', 'w', max_jobs => 2);
SELECT count(job_state.succeed(token)) FROM job_state.claim('lim_hot', 'w', max_jobs => 2);
SELECT count(job_state.succeed(token)) FROM job_state.claim('lim_hot', 'w', max_jobs => 2);
SELECT count(job_state.succeed(token)) FROM job_state.claim('lim_hot', 'w', max_jobs => 2);
SELECT count(job_state.succeed(token)) FROM job_state.claim('lim_hot', 'w', max_jobs => 2);
SELECT pg_stat_force_next_flush();
SELECT n_tup_upd - :upd0 AS slot_updates, n_tup_hot_upd - :hot0 AS hot_updates
  FROM pg_stat_user_tables WHERE relid = 'job_state.slot'::regclass;
SELECT count(*) AS held FROM job_state.slot WHERE scope = 'lim_hot' AND job_id IS NOT NULL;

-- the slots are walked in ranges (16, then 64, ...): a limit of 20 is
-- filled to the last slot, past the first range
SELECT job_state.create_queue('lim_wide', concurrency_limit => 20);
SELECT count(*) FROM (SELECT job_state.submit('lim_wide', jsonb_build_object('i', i))
						FROM generate_series(1, 25) i) s;
SELECT count(*) AS first_claim FROM job_state.claim('lim_wide', 'w', max_jobs => 18);
SELECT count(*) AS second_claim FROM job_state.claim('lim_wide', 'w', max_jobs => 10);
SELECT count(*) AS running, min(queue_slot), max(queue_slot),
       count(DISTINCT queue_slot) AS distinct_slots
  FROM job_state.job WHERE queue = 'lim_wide' AND status = 'running';
