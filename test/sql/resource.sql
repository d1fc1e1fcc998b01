-- resources: alter_resource, slots that follow the limit, and the guard
-- that keeps a resource its jobs name
\getenv abs_srcdir PG_ABS_SRCDIR
\i :abs_srcdir/sql/include/fresh_extension.sql
\set VERBOSITY sqlstate

SELECT job_state.create_queue('rq');
SELECT job_state.create_queue('rq2');

-- create_resource makes the slots of its limit (by its AFTER INSERT trigger)
SELECT job_state.create_resource('gpu', 2);
SELECT count(*) AS slots FROM job_state.slot WHERE kind = 'resource' AND scope = 'gpu';
SELECT count(*) FROM (SELECT job_state.submit(q, jsonb_build_object('n', i), resource => 'gpu')
                        FROM generate_series(1, 4) i, unnest(ARRAY['rq', 'rq2']) q) s;
SELECT count(*) AS started_at_2 FROM job_state.claim('rq', 'w', max_jobs => 10);
SELECT count(*) AS none_in_rq2 FROM job_state.claim('rq2', 'w', max_jobs => 10);

-- alter_resource raises the limit: the new slots are used at once
SELECT job_state.alter_resource('gpu', concurrency_limit => 3);
SELECT count(*) AS slots FROM job_state.slot WHERE kind = 'resource' AND scope = 'gpu';
SELECT count(*) AS one_more FROM job_state.claim('rq2', 'w', max_jobs => 10);
-- a NULL keeps the value; the rate is set on its own
SELECT job_state.alter_resource('gpu', max_starts_per_second => 50);
SELECT concurrency_limit, max_starts_per_second FROM job_state.resource WHERE name = 'gpu';
-- raw SQL too
UPDATE job_state.resource SET concurrency_limit = 4 WHERE name = 'gpu';
SELECT count(*) AS one_more_by_raw_sql FROM job_state.claim('rq2', 'w', max_jobs => 10);
SELECT count(*) AS held FROM job_state.slot
 WHERE kind = 'resource' AND scope = 'gpu' AND job_id IS NOT NULL;
-- lowered: the slots above stay, unused
SELECT job_state.alter_resource('gpu', concurrency_limit => 1);
SELECT count(*) AS slots_kept FROM job_state.slot WHERE kind = 'resource' AND scope = 'gpu';
SELECT count(*) AS nothing_starts_at_1 FROM job_state.claim('rq', 'w');

-- a resource created with only a rate has no slots; a limit set later
-- counts the jobs already running (they take free slots and hold them)
SELECT job_state.create_resource('api', NULL, 1000);
SELECT count(*) FROM (SELECT job_state.submit('rq', jsonb_build_object('api', i), resource => 'api')
                        FROM generate_series(1, 5) i) s;
SELECT array_agg(token ORDER BY job_id) AS api_tokens
  FROM job_state.claim('rq', 'api-worker', max_jobs => 2) c
  JOIN job_state.job j ON j.id = c.job_id AND j.resource = 'api' \gset
SELECT count(*) AS api_running FROM job_state.job WHERE resource = 'api' AND status = 'running';
SELECT job_state.alter_resource('api', concurrency_limit => 3);
SELECT count(job_id) AS adopted FROM job_state.slot WHERE kind = 'resource' AND scope = 'api';
SELECT count(*) AS holding FROM job_state.job j JOIN job_state.slot s
    ON s.kind = 'resource' AND s.scope = 'api' AND s.n = j.resource_slot AND s.job_id = j.id
 WHERE j.resource = 'api' AND j.status = 'running';
SELECT count(*) AS one_more_of_3 FROM job_state.claim('rq', 'w', max_jobs => 10) c
  JOIN job_state.job j ON j.id = c.job_id AND j.resource = 'api';
SELECT count(*) AS at_limit FROM job_state.claim('rq', 'w', max_jobs => 10) c
  JOIN job_state.job j ON j.id = c.job_id AND j.resource = 'api';
-- an adopted slot is freed as any other
SELECT job_state.succeed((:'api_tokens'::job_state.claim_token[])[1]);
SELECT count(*) AS one_for_the_freed_slot FROM job_state.claim('rq', 'w', max_jobs => 10) c
  JOIN job_state.job j ON j.id = c.job_id AND j.resource = 'api';

-- errors of alter_resource
SELECT job_state.alter_resource('nope', 2);
SELECT job_state.alter_resource('gpu', 0);
SELECT job_state.alter_resource('gpu', NULL, -1);
SELECT job_state.alter_resource(NULL, 1);
SELECT job_state.create_resource('gpu', 1);
\set VERBOSITY default
SELECT job_state.alter_resource('nope', 2);
\set VERBOSITY sqlstate

-- a resource jobs name is neither deleted, nor truncated away, nor renamed
DELETE FROM job_state.resource WHERE name = 'gpu';
TRUNCATE job_state.resource;
UPDATE job_state.resource SET name = 'gpu2' WHERE name = 'gpu';
-- a queue whose jobs named a resource keeps taking the slot path
UPDATE job_state.queue SET uses_resources = false WHERE name = 'rq';
\set VERBOSITY default
DELETE FROM job_state.resource WHERE name = 'gpu';
TRUNCATE job_state.resource;
UPDATE job_state.resource SET name = 'gpu2' WHERE name = 'gpu';
UPDATE job_state.queue SET uses_resources = false WHERE name = 'rq';
\set VERBOSITY sqlstate
-- also not while the job naming it is only in this transaction
SELECT job_state.create_resource('fresh', 1);
BEGIN;
SELECT count(*) FROM job_state.submit('rq', '{"fresh": 1}', resource => 'fresh');
DELETE FROM job_state.resource WHERE name = 'fresh';
ROLLBACK;
-- finished jobs name it as well (a redrive would bring them back)
SELECT job_state.create_queue('rq3');
SELECT job_state.create_resource('once', 1);
SELECT job_id AS once_job FROM job_state.submit('rq3', '{"once": 1}', resource => 'once') \gset
SELECT job_state.succeed(c.token) FROM job_state.claim('rq3', 'w') c;
SELECT status FROM job_state.job WHERE id = :once_job;
DELETE FROM job_state.resource WHERE name = 'once';
-- once purged, the resource and its slots go
SELECT job_state.purge('0') >= 1 AS purged;
DELETE FROM job_state.resource WHERE name = 'once';
SELECT count(*) AS once_slots FROM job_state.slot WHERE scope = 'once';
-- a resource no job ever named leaves at once
DELETE FROM job_state.resource WHERE name = 'fresh';
SELECT count(*) AS fresh_slots FROM job_state.slot WHERE scope = 'fresh';
-- the limits may change freely
UPDATE job_state.resource SET max_starts_per_second = 10 WHERE name = 'gpu';

-- submit after the resource is gone: JS008
SELECT job_state.create_resource('gone', 1);
DELETE FROM job_state.resource WHERE name = 'gone';
SELECT job_state.submit('rq', '{"gone": 1}', resource => 'gone');

-- raw SQL is counted as submit is: a job inserted naming a resource marks
-- its queue for the slot-taking claim, so the limit holds
SELECT job_state.create_queue('raw_rq');
SELECT job_state.create_resource('raw_gpu', 1);
SELECT uses_resources FROM job_state.queue WHERE name = 'raw_rq';
INSERT INTO job_state.job (queue, input, input_hash, resource)
  SELECT 'raw_rq', jsonb_build_object('raw', i), '\x00', 'raw_gpu' FROM generate_series(1, 3) i;
SELECT uses_resources FROM job_state.queue WHERE name = 'raw_rq';
SELECT count(*) AS one_of_3_raw FROM job_state.claim('raw_rq', 'w', max_jobs => 10);
-- a job that names no resource yet, then gets one while it waits
SELECT job_state.create_queue('raw_rq2');
SELECT job_id AS later_job FROM job_state.submit('raw_rq2', '{"later": 1}') \gset
UPDATE job_state.job SET resource = 'raw_gpu' WHERE id = :later_job;
SELECT uses_resources FROM job_state.queue WHERE name = 'raw_rq2';
SELECT count(*) AS none_while_raw_gpu_is_full FROM job_state.claim('raw_rq2', 'w');
-- a resource that does not exist is refused, inserted or set
INSERT INTO job_state.job (queue, input, input_hash, resource) VALUES ('raw_rq', '{}', '\x00', 'nope');
UPDATE job_state.job SET resource = 'nope' WHERE id = :later_job;
-- once the job may run, its resource and key are fixed
SELECT id AS run_job FROM job_state.job WHERE queue = 'raw_rq' AND status = 'running' \gset
UPDATE job_state.job SET resource = NULL WHERE id = :run_job;
UPDATE job_state.job SET concurrency_key = 'k' WHERE id = :run_job;
\set VERBOSITY default
INSERT INTO job_state.job (queue, input, input_hash, resource) VALUES ('raw_rq', '{}', '\x00', 'nope');
UPDATE job_state.job SET resource = NULL WHERE id = :run_job;
\set VERBOSITY sqlstate
-- a key inserted by raw SQL into a queue with a per-key limit gets its slots
SELECT job_state.create_queue('raw_keyed', per_key_limit => 1);
INSERT INTO job_state.job (queue, input, input_hash, concurrency_key)
  SELECT 'raw_keyed', jsonb_build_object('k', i), '\x00', 'tenant' FROM generate_series(1, 2) i;
SELECT count(*) AS tenant_slots FROM job_state.slot WHERE kind = 'key' AND scope = 'raw_keyed';
SELECT count(*) AS one_per_key FROM job_state.claim('raw_keyed', 'w', max_jobs => 10);

-- a job whose resource has no concurrency limit holds no slot, not even
-- the spare a job of another resource left: here the first job takes a
-- slot of spare_a, then fails as used up (deadline), and the second job
-- (resource spare_b, a rate only) starts without it, so the third
-- (spare_a again) takes the slot in the same claim
SELECT job_state.create_queue('spare_q');
SELECT job_state.create_resource('spare_a', 1);
SELECT job_state.create_resource('spare_b', NULL, 1000);
SELECT count(*) FROM job_state.submit('spare_q', '{"n": 1}', resource => 'spare_a',
									  deadline => now() - interval '1 s');
SELECT job_id AS spare_b_job FROM job_state.submit('spare_q', '{"n": 2}', resource => 'spare_b') \gset
SELECT job_id AS spare_a_job FROM job_state.submit('spare_q', '{"n": 3}', resource => 'spare_a') \gset
SELECT array_agg(job_id ORDER BY job_id) = ARRAY[:spare_b_job, :spare_a_job]::bigint[] AS both_started
  FROM job_state.claim('spare_q', 'w', max_jobs => 3);
SELECT resource_slot IS NOT NULL AS spare_b_holds_slots FROM job_state.job WHERE id = :spare_b_job;
SELECT job_id = :spare_a_job AS held_by_the_spare_a_job FROM job_state.slot WHERE scope = 'spare_a';

-- restore mode (superuser) lets a dump be replayed or repaired as it is
SET job_state.restore = on;
UPDATE job_state.resource SET concurrency_limit = 10 WHERE name = 'gpu';
SELECT count(*) AS no_new_slots_in_restore FROM job_state.slot
 WHERE kind = 'resource' AND scope = 'gpu';
DELETE FROM job_state.job WHERE resource IS NOT NULL;
RESET job_state.restore;
-- no job names a resource now: TRUNCATE goes, and takes the slots along
TRUNCATE job_state.resource;
SELECT count(*) AS resource_slots FROM job_state.slot WHERE kind = 'resource';

-- concurrency_limit defaults to NULL (no limit): a rate alone by name
SELECT job_state.create_resource('rate_only', max_starts_per_second => 5);
SELECT concurrency_limit IS NULL AS no_limit, max_starts_per_second
  FROM job_state.resource WHERE name = 'rate_only';
SELECT count(*) AS no_slots FROM job_state.slot WHERE kind = 'resource' AND scope = 'rate_only';
-- the positional forms are as they were
SELECT job_state.create_resource('limit_only', 3);
SELECT concurrency_limit, max_starts_per_second IS NULL AS no_rate
  FROM job_state.resource WHERE name = 'limit_only';
-- neither limit: refused
SELECT job_state.create_resource('no_limits');
\set VERBOSITY default
SELECT job_state.create_resource('no_limits');
\set VERBOSITY sqlstate
SELECT count(*) AS not_created FROM job_state.resource WHERE name = 'no_limits';
