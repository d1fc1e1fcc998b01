-- the rules hold for raw SQL too: the job triggers (ENABLE ALWAYS)
\getenv abs_srcdir PG_ABS_SRCDIR
\i :abs_srcdir/sql/include/fresh_extension.sql
\set VERBOSITY sqlstate
SELECT job_state.create_queue('raw');
SELECT count(*) FROM (SELECT job_state.submit('raw', jsonb_build_object('n', i)) FROM generate_series(1, 6) i) s;

-- INSERT only as accepted with zero counters; input_hash is computed for a
-- job with a key (whatever the INSERT gave), NULL without one
INSERT INTO job_state.job (queue, input, input_hash, status) VALUES ('raw', '{}', '\x00', 'running');
INSERT INTO job_state.job (queue, input, input_hash, generation) VALUES ('raw', '{}', '\x00', 3);
INSERT INTO job_state.job (queue, input, input_hash, attempts) VALUES ('raw', '{}', '\x00', 1);
INSERT INTO job_state.job (queue, input, input_hash) VALUES ('raw', '{"raw": 1}', '\x00') RETURNING id, status,
       input_hash = sha256(convert_to('{"raw": 1}', 'UTF8')) AS hash_computed;
INSERT INTO job_state.job (queue, input, input_hash, idempotency_key) VALUES ('raw', '{"raw": 2}', '\x00', 'raw-key')
RETURNING status, input_hash = sha256(convert_to('{"raw": 2}', 'UTF8')) AS hash_computed;

-- key lengths and max_attempts are checked like CHECK constraints
INSERT INTO job_state.job (queue, input, input_hash, idempotency_key) VALUES ('raw', '{}', '\x00', '');
INSERT INTO job_state.job (queue, input, input_hash, concurrency_key) VALUES ('raw', '{}', '\x00', repeat('k', 256));
INSERT INTO job_state.job (queue, input, input_hash, max_attempts) VALUES ('raw', '{}', '\x00', 0);
UPDATE job_state.job SET max_attempts = 0 WHERE id = 2;
UPDATE job_state.job SET concurrency_key = '' WHERE id = 2;
\set VERBOSITY default
UPDATE job_state.job SET max_attempts = -1 WHERE id = 2;
\set VERBOSITY sqlstate

-- transitions outside the table: JS003
UPDATE job_state.job SET status = 'succeeded' WHERE id = 1;
UPDATE job_state.job SET status = 'unknown' WHERE id = 1;
\set VERBOSITY default
UPDATE job_state.job SET status = 'succeeded' WHERE id = 1;
\set VERBOSITY sqlstate
-- entering running needs a lease
UPDATE job_state.job SET status = 'running' WHERE id = 1;
-- entering running bumps generation and attempts, whatever the statement says
UPDATE job_state.job SET status = 'running', generation = 0, attempts = 0,
       lease_expires_at = now() + interval '1 min' WHERE id = 1
RETURNING status, generation, attempts, started_at IS NOT NULL AS started;
-- counters never go back
UPDATE job_state.job SET generation = 0 WHERE id = 1;
UPDATE job_state.job SET attempts = 0 WHERE id = 1;
UPDATE job_state.job SET generation = 7 WHERE id = 1 RETURNING generation;
UPDATE job_state.job SET retries = 2 WHERE id = 1;
UPDATE job_state.job SET retries = 1 WHERE id = 1;
UPDATE job_state.job SET throttles = 1 WHERE id = 1;
UPDATE job_state.job SET throttles = 0 WHERE id = 1;
-- fixed columns
UPDATE job_state.job SET input = '{"other": 1}' WHERE id = 2;
UPDATE job_state.job SET queue = 'raw2' WHERE id = 2;
UPDATE job_state.job SET id = 100 WHERE id = 2;
UPDATE job_state.job SET idempotency_key = 'new' WHERE id = 2;
UPDATE job_state.job SET input_hash = '\x00' WHERE id = 2;
-- the job row is the record of its submit: who and when are fixed too
UPDATE job_state.job SET submitted_by = 'pg_monitor' WHERE id = 2;
UPDATE job_state.job SET accepted_at = accepted_at - interval '1 day' WHERE id = 2;
-- a no-op write of the same input is fine
UPDATE job_state.job SET input = input, priority = 3 WHERE id = 2 RETURNING priority;
-- leaving running clears the lease and stamps finished_at
UPDATE job_state.job SET status = 'unknown' WHERE id = 1
RETURNING status, lease_expires_at, finished_at IS NOT NULL AS finished;
-- a re-run out of unknown bumps the generation and may reset retries
UPDATE job_state.job SET status = 'accepted', retries = 0 WHERE id = 1
RETURNING status, generation, retries, finished_at;

-- starts beyond the limits: JS005, JS006, JS004
UPDATE job_state.job SET max_attempts = 2 WHERE id = 3;
UPDATE job_state.job SET status = 'running', lease_expires_at = now() + interval '1 min' WHERE id = 3;
UPDATE job_state.job SET status = 'failed' WHERE id = 3;
UPDATE job_state.job SET status = 'accepted' WHERE id = 3;
UPDATE job_state.job SET status = 'running', lease_expires_at = now() + interval '1 min' WHERE id = 3;
UPDATE job_state.job SET status = 'failed' WHERE id = 3;
UPDATE job_state.job SET status = 'accepted' WHERE id = 3;
UPDATE job_state.job SET status = 'running', lease_expires_at = now() + interval '1 min' WHERE id = 3;
UPDATE job_state.job SET deadline = now() - interval '1 s' WHERE id = 4;
UPDATE job_state.job SET status = 'running', lease_expires_at = now() + interval '1 min' WHERE id = 4;
UPDATE job_state.job SET budget = '{"usd": 5}', spent = '{"usd": 5}' WHERE id = 5;
UPDATE job_state.job SET status = 'running', lease_expires_at = now() + interval '1 min' WHERE id = 5;
\set VERBOSITY default
UPDATE job_state.job SET status = 'running', lease_expires_at = now() + interval '1 min' WHERE id = 3;
UPDATE job_state.job SET status = 'running', lease_expires_at = now() + interval '1 min' WHERE id = 5;
\set VERBOSITY sqlstate
-- spent amounts never go back
UPDATE job_state.job SET spent = '{"usd": 4}' WHERE id = 5;
UPDATE job_state.job SET spent = '{}' WHERE id = 5;
UPDATE job_state.job SET spent = '{"usd": 6, "tokens": 1}' WHERE id = 5 RETURNING spent;

-- succeeded is final
UPDATE job_state.job SET status = 'running', lease_expires_at = now() + interval '1 min' WHERE id = 6;
UPDATE job_state.job SET status = 'succeeded', result = '{"ok": 1}' WHERE id = 6;
UPDATE job_state.job SET result = '{"ok": 2}' WHERE id = 6;
UPDATE job_state.job SET status = 'accepted' WHERE id = 6;
UPDATE job_state.job SET priority = 9 WHERE id = 6;

-- DELETE only of finished jobs, and only through purge
DELETE FROM job_state.job WHERE id = 2;
DELETE FROM job_state.job WHERE id = 6;
\set VERBOSITY default
DELETE FROM job_state.job WHERE id = 2;
DELETE FROM job_state.job WHERE id = 6;
\set VERBOSITY sqlstate
TRUNCATE job_state.job;
TRUNCATE job_state.job_event_log;
-- job_event (the view), job_event_log and spend are append-only
UPDATE job_state.job_event SET to_status = 'failed';
DELETE FROM job_state.job_event;
INSERT INTO job_state.job_event (queue, job_id, to_status, generation) VALUES ('raw', 5, 'failed', 1);
UPDATE job_state.job_event_log SET to_status = 'failed';
DELETE FROM job_state.job_event_log;
INSERT INTO job_state.spend (queue, job_id, generation, meter, amount) VALUES ('raw', 5, 0, 'usd', 1);
DELETE FROM job_state.spend;
UPDATE job_state.spend SET amount = 0;
TRUNCATE job_state.spend;

-- session_replication_role = replica does not switch the rules off
SET session_replication_role = replica;
UPDATE job_state.job SET status = 'succeeded' WHERE id = 2;
DELETE FROM job_state.job WHERE id = 2;
RESET session_replication_role;

-- every change of status or generation was recorded
SELECT from_status, to_status, generation FROM job_state.job_event WHERE job_id = 1 ORDER BY seq;

-- job_state.track_events = off stops the history, not the rules
SET job_state.track_events = off;
UPDATE job_state.job SET status = 'cancelled' WHERE id = 2;
RESET job_state.track_events;
SELECT count(*) AS events_for_2 FROM job_state.job_event WHERE job_id = 2;

-- job_state.restore lets a superuser replay a dump (rows as they were)
SET job_state.restore = on;
INSERT INTO job_state.job (queue, id, input, input_hash, status, generation, attempts,
                           started_at, lease_expires_at)
VALUES ('raw', 1000, '{}', '\x00', 'running', 5, 4, now(), now() + interval '1 hour');
RESET job_state.restore;
SELECT id, status, generation, attempts FROM job_state.job WHERE id = 1000;
-- job_state.restore is superuser only
CREATE ROLE regress_js_raw_nobody;
SET ROLE regress_js_raw_nobody;
SET job_state.restore = on;
RESET ROLE;
DROP ROLE regress_js_raw_nobody;
-- unknown job_state.* settings are refused
SET job_state.no_such_setting = 1;

-- a running job records the slots it holds; raw SQL can neither insert a
-- job holding one nor change a running job's number (the slot would stay
-- held for good)
SELECT job_state.create_queue('raw_lim', concurrency_limit => 1);
\set VERBOSITY default
INSERT INTO job_state.job (queue, input, input_hash, queue_slot) VALUES ('raw_lim', '{}', '\x00', 1);
SELECT job_id AS rl FROM job_state.submit('raw_lim', '{"n": 1}') \gset
SELECT token AS rl_token FROM job_state.claim('raw_lim', 'w') \gset
UPDATE job_state.job SET queue_slot = NULL WHERE id = :rl;
\set VERBOSITY sqlstate
UPDATE job_state.job SET queue_slot = 2 WHERE id = :rl;
SELECT queue_slot FROM job_state.job WHERE id = :rl;
-- a raw start cannot name slot numbers (here the slot another job holds,
-- and a key slot on a job without a key)
SELECT job_id AS rl2 FROM job_state.submit('raw_lim', '{"n": 2}') \gset
UPDATE job_state.job SET status = 'running', lease_expires_at = now() + interval '1 min',
       queue_slot = 1, key_slot = 1 WHERE id = :rl2;
-- a raw start is held to the limits as a claim is: the queue's one slot is
-- rl's, so rl2 cannot start
UPDATE job_state.job SET status = 'running', lease_expires_at = now() + interval '1 min'
 WHERE id = :rl2;
SELECT job_id = :rl AS still_held_by_its_job FROM job_state.slot WHERE scope = 'raw_lim';
SELECT job_state.succeed(:'rl_token');
SELECT job_id AS freed FROM job_state.slot WHERE scope = 'raw_lim';
-- once it is free, the raw start takes it, and claim finds the limit full
UPDATE job_state.job SET status = 'running', lease_expires_at = now() + interval '1 min'
 WHERE id = :rl2 RETURNING queue_slot, attempts;
SELECT job_id = :rl2 AS held_by_raw_start FROM job_state.slot WHERE scope = 'raw_lim';
SELECT job_id AS rl3 FROM job_state.submit('raw_lim', '{"n": 3}') \gset
SELECT count(*) AS claimed_past_limit FROM job_state.claim('raw_lim', 'w');
UPDATE job_state.job SET status = 'failed' WHERE id = :rl2 RETURNING queue_slot;
SELECT job_id AS freed_again FROM job_state.slot WHERE scope = 'raw_lim';
SELECT job_id = :rl3 AS claimed_after FROM job_state.claim('raw_lim', 'w');
-- a per-key limit and a resource's limit too
SELECT job_state.create_resource('raw_gpu', concurrency_limit => 1);
SELECT job_state.create_queue('raw_keyed', per_key_limit => 1);
SELECT job_id AS k1 FROM job_state.submit('raw_keyed', '{"n": 1}', concurrency_key => 'tenant-1') \gset
SELECT job_id AS k2 FROM job_state.submit('raw_keyed', '{"n": 2}', concurrency_key => 'tenant-1') \gset
SELECT job_id AS g1 FROM job_state.submit('raw_keyed', '{"n": 3}', resource => 'raw_gpu') \gset
SELECT job_id AS g2 FROM job_state.submit('raw_keyed', '{"n": 4}', resource => 'raw_gpu') \gset
UPDATE job_state.job SET status = 'running', lease_expires_at = now() + interval '1 min'
 WHERE id IN (:k1, :g1) RETURNING id = :k1 AS is_k1, key_slot, resource_slot;
UPDATE job_state.job SET status = 'running', lease_expires_at = now() + interval '1 min'
 WHERE id = :k2;
UPDATE job_state.job SET status = 'running', lease_expires_at = now() + interval '1 min'
 WHERE id = :g2;
SELECT count(*) AS claimed_past_limits FROM job_state.claim('raw_keyed', 'w', max_jobs => 10);
-- a key is measured as it is, not as it is stored: a long key brought in
-- toasted out of line or compressed from another table is refused
CREATE TABLE raw_keys (k text);
ALTER TABLE raw_keys ALTER COLUMN k SET STORAGE EXTERNAL;
INSERT INTO raw_keys VALUES (repeat('k', 10000));
CREATE TABLE raw_keys_c (k text);
INSERT INTO raw_keys_c VALUES (repeat('c', 3000));
SELECT pg_column_size(k) < 255 AS stored_small FROM raw_keys_c;
INSERT INTO job_state.job (queue, input, input_hash, idempotency_key)
SELECT 'raw', '{}', '\x00', k FROM raw_keys;
INSERT INTO job_state.job (queue, input, input_hash, idempotency_key)
SELECT 'raw', '{}', '\x00', k FROM raw_keys_c;
UPDATE job_state.job SET concurrency_key = (SELECT k FROM raw_keys)
 WHERE id = (SELECT min(id) FROM job_state.job WHERE status = 'accepted');
SELECT count(*) AS long_keys FROM job_state.job
 WHERE octet_length(idempotency_key) > 255 OR octet_length(concurrency_key) > 255;
DROP TABLE raw_keys, raw_keys_c;
-- a raw start spends a start token too: with one start a second allowed,
-- the second raw start within the second is refused
SELECT job_state.create_resource('raw_rated', max_starts_per_second => 1);
SELECT job_state.create_queue('raw_rated_q');
SELECT job_id AS r1 FROM job_state.submit('raw_rated_q', '{"n": 1}', resource => 'raw_rated') \gset
SELECT job_id AS r2 FROM job_state.submit('raw_rated_q', '{"n": 2}', resource => 'raw_rated') \gset
\set VERBOSITY terse
UPDATE job_state.job SET status = 'running', lease_expires_at = now() + interval '1 min'
 WHERE id = :r1 RETURNING status;
UPDATE job_state.job SET status = 'running', lease_expires_at = now() + interval '1 min'
 WHERE id = :r2 RETURNING status;
\set VERBOSITY sqlstate

-- INSERT and UPDATE are held to one table of the columns only transitions
-- set (fsm.c): a new job has no lease, callback timeout, heartbeat
-- interval, start, end, worker, result, error, reason or progress, and no
-- cancel request
SELECT job_state.create_queue('raw_cols');
INSERT INTO job_state.job (queue, input, lease_expires_at) VALUES ('raw_cols', '{}', now() - interval '1 hour');
INSERT INTO job_state.job (queue, input, callback_timeout_at) VALUES ('raw_cols', '{}', now());
INSERT INTO job_state.job (queue, input, heartbeat_interval) VALUES ('raw_cols', '{}', '-1 s');
INSERT INTO job_state.job (queue, input, started_at) VALUES ('raw_cols', '{}', now());
INSERT INTO job_state.job (queue, input, finished_at) VALUES ('raw_cols', '{}', now());
INSERT INTO job_state.job (queue, input, worker) VALUES ('raw_cols', '{}', 'w');
INSERT INTO job_state.job (queue, input, result) VALUES ('raw_cols', '{}', '{}');
INSERT INTO job_state.job (queue, input, last_error) VALUES ('raw_cols', '{}', '{}');
INSERT INTO job_state.job (queue, input, reason) VALUES ('raw_cols', '{}', 'r');
INSERT INTO job_state.job (queue, input, progress) VALUES ('raw_cols', '{}', '{}');
INSERT INTO job_state.job (queue, input, progress_at) VALUES ('raw_cols', '{}', now());
INSERT INTO job_state.job (queue, input, cancel_requested) VALUES ('raw_cols', '{}', true);
\set VERBOSITY default
INSERT INTO job_state.job (queue, input, lease_expires_at) VALUES ('raw_cols', '{}', now() - interval '1 hour');
\set VERBOSITY sqlstate
-- nothing counted as waiting, no lease due for ever
SELECT accepted, waiting FROM job_state.queue_stats WHERE queue = 'raw_cols';
SELECT count(*) AS leases FROM job_state.job WHERE queue = 'raw_cols' AND lease_expires_at IS NOT NULL;
-- an UPDATE writes only what the new status may hold: not on an accepted
-- job, and a running job keeps its lease and has not finished
SELECT job_id AS c1 FROM job_state.submit('raw_cols', '{"n": 1}') \gset
UPDATE job_state.job SET lease_expires_at = now() - interval '1 hour' WHERE id = :c1;
UPDATE job_state.job SET callback_timeout_at = now() WHERE id = :c1;
UPDATE job_state.job SET result = '{}' WHERE id = :c1;
UPDATE job_state.job SET finished_at = now() WHERE id = :c1;
SELECT token AS c1_token FROM job_state.claim('raw_cols', 'w') \gset
\set VERBOSITY default
UPDATE job_state.job SET lease_expires_at = NULL WHERE id = :c1;
UPDATE job_state.job SET result = '{}' WHERE id = :c1;
\set VERBOSITY sqlstate
UPDATE job_state.job SET started_at = NULL WHERE id = :c1;
UPDATE job_state.job SET heartbeat_interval = '1 min' WHERE id = :c1;
-- a change of status clears what the old status held: the lease
UPDATE job_state.job SET status = 'unknown' WHERE id = :c1
RETURNING status, lease_expires_at, finished_at IS NOT NULL AS finished;
UPDATE job_state.job SET finished_at = NULL WHERE id = :c1;
UPDATE job_state.job SET status = 'unknown', lease_expires_at = now() WHERE id = :c1;
-- a restored row (any status) holds what its status may hold
SET job_state.restore = on;
INSERT INTO job_state.job (queue, id, input, status, lease_expires_at)
VALUES ('raw_cols', 2001, '{}', 'accepted', now());
INSERT INTO job_state.job (queue, id, input, status, generation, attempts, started_at)
VALUES ('raw_cols', 2002, '{}', 'running', 1, 1, now());
INSERT INTO job_state.job (queue, id, input, status, generation, attempts, started_at,
                           lease_expires_at, callback_timeout_at, heartbeat_interval)
VALUES ('raw_cols', 2003, '{}', 'waiting', 1, 1, now(), now(), now() + interval '1 hour', '-1 s');
INSERT INTO job_state.job (queue, id, input, status, generation, attempts, started_at, finished_at, result)
VALUES ('raw_cols', 2004, '{}', 'succeeded', 1, 1, now(), now(), '{"ok": true}')
RETURNING id, status;
RESET job_state.restore;

-- a raw INSERT into a queue that does not exist: JS008, as submit says
\set VERBOSITY default
INSERT INTO job_state.job (queue, input) VALUES ('raw_no_such_queue', '{}');
SELECT job_state.submit('raw_no_such_queue', '{}');
\set VERBOSITY sqlstate
-- a job id names one job across all queues: a raw INSERT cannot reuse
-- another queue's id, nor take one job_state.job_id_seq has not given
SELECT job_state.create_queue('raw_other');
\set VERBOSITY default
INSERT INTO job_state.job (queue, id, input) VALUES ('raw_other', :c1, '{}');
INSERT INTO job_state.job (queue, id, input) VALUES ('raw_other', 900000000, '{}');
\set VERBOSITY sqlstate
INSERT INTO job_state.job (queue, input) VALUES ('raw_other', '{}'), ('raw_cols', '{}');

-- no row of one queue makes a statement over all queues fail: a running
-- job restored into raw_other with the id of a running job of raw_cols,
-- both leases run out; sweep() (lease expiry of every queue, retention,
-- schedules), queue_stats and purge serve both queues
SELECT job_id AS d1 FROM job_state.submit('raw_cols', '{"n": "d1"}') \gset
UPDATE job_state.job SET status = 'cancelled' WHERE queue = 'raw_cols' AND status = 'accepted' AND id <> :d1;
SELECT job_id = :d1 AS claimed_d1 FROM job_state.claim('raw_cols', 'w', lease => '1 s');
UPDATE job_state.job SET lease_expires_at = now() - interval '1 s' WHERE id = :d1;
SET job_state.restore = on;
INSERT INTO job_state.job (queue, id, input, status, generation, attempts, started_at, lease_expires_at)
VALUES ('raw_other', :d1, '{}', 'running', 1, 1, now() - interval '1 min', now() - interval '1 s');
RESET job_state.restore;
SELECT job_state.sweep() >= 2 AS swept;
SELECT queue, status, reason FROM job_state.job WHERE id = :d1 ORDER BY queue;
SELECT queue, unknown FROM job_state.queue_stats WHERE queue IN ('raw_cols', 'raw_other') ORDER BY queue;
UPDATE job_state.job SET status = 'failed' WHERE id = :d1 AND status = 'unknown';
SELECT job_state.purge('0 s') >= 2 AS purged;
SELECT count(*) AS left_of_d1 FROM job_state.job WHERE id = :d1;
-- only the rows a submit inserted pass over the raw-INSERT checks while
-- its AFTER triggers fire: a row a trigger of the user's inserts then, into
-- a queue that does not exist, is refused as any raw INSERT is
CREATE FUNCTION pg_temp.plant() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO job_state.job (queue, input) VALUES ('raw_nowhere', '{}');
	RETURN NULL;
END $$;
CREATE TRIGGER plant AFTER INSERT ON job_state.job
	FOR EACH ROW WHEN (NEW.queue = 'raw') EXECUTE FUNCTION pg_temp.plant();
SELECT created FROM job_state.submit('raw', '{"n": "planted"}');
DROP TRIGGER plant ON job_state.job;
SELECT count(*) AS planted FROM job_state.job WHERE queue = 'raw_nowhere';
