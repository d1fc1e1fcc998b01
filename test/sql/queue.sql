-- queue administration: options, validation, pause/resume
\getenv abs_srcdir PG_ABS_SRCDIR
\i :abs_srcdir/sql/include/fresh_extension.sql
\set VERBOSITY sqlstate

SELECT job_state.create_queue('q_default');
SELECT name, lease, max_lease, retry_interval, backoff_rate, max_retries, max_delay,
       jitter, max_attempts, on_lease_expiry, concurrency_limit, per_key_limit, paused
  FROM job_state.queue;
SELECT job_state.create_queue('q_custom', lease => '30 s', max_lease => '1 hour',
       retry_interval => '1 s', backoff_rate => 3, max_retries => 5, max_delay => '1 min',
       jitter => 'none', max_attempts => 10, on_lease_expiry => 'retry',
       concurrency_limit => 4, per_key_limit => 1);

-- duplicate name: 42710
SELECT job_state.create_queue('q_default');
-- names: 1 to 128 characters
SELECT job_state.create_queue('');
SELECT job_state.create_queue(repeat('x', 129));
SELECT job_state.create_queue(repeat('é', 128));
-- nulls: 22004
SELECT job_state.create_queue(NULL);
SELECT job_state.create_queue('q_bad', lease => NULL);
-- bad options: 22023
SELECT job_state.create_queue('q_bad', lease => '0 s');
SELECT job_state.create_queue('q_bad', lease => '-1 s');
SELECT job_state.create_queue('q_bad', max_lease => '0');
SELECT job_state.create_queue('q_bad', retry_interval => '-1 s');
SELECT job_state.create_queue('q_bad', backoff_rate => 0.5);
SELECT job_state.create_queue('q_bad', backoff_rate => 'NaN');
SELECT job_state.create_queue('q_bad', max_retries => -1);
SELECT job_state.create_queue('q_bad', max_delay => '-1 s');
SELECT job_state.create_queue('q_bad', jitter => 'some');
SELECT job_state.create_queue('q_bad', max_attempts => 0);
SELECT job_state.create_queue('q_bad', on_lease_expiry => 'fail');
SELECT job_state.create_queue('q_bad', concurrency_limit => 0);
SELECT job_state.create_queue('q_bad', per_key_limit => 0);
SELECT count(*) AS bad_queues FROM job_state.queue WHERE name = 'q_bad';

-- alter_queue changes only what it is given
SELECT job_state.alter_queue('q_custom', max_retries => 7, jitter => 'full');
SELECT name, lease, max_retries, jitter, backoff_rate, concurrency_limit
  FROM job_state.queue WHERE name = 'q_custom';
SELECT job_state.alter_queue('q_custom', lease => '0 s');
SELECT job_state.alter_queue('nope', lease => '1 s');
SELECT job_state.alter_queue(NULL);

-- pause stops claims, not submits; resume restarts them
SELECT job_id FROM job_state.submit('q_default', '{}');
SELECT job_state.pause_queue('q_default');
SELECT count(*) AS claimed_while_paused FROM job_state.claim('q_default', 'w');
SELECT job_id FROM job_state.submit('q_default', '{"b": 1}');
SELECT job_state.resume_queue('q_default');
SELECT job_id FROM job_state.claim('q_default', 'w', max_jobs => 10);
SELECT job_state.pause_queue('nope');
SELECT job_state.resume_queue('nope');

-- raw SQL still meets the table's checks
INSERT INTO job_state.queue (name, jitter) VALUES ('q_raw', 'sometimes');

-- each queue gets its stale-refusal counter; DROP EXTENSION removes them
SELECT count(*) AS counters FROM pg_class WHERE relname LIKE 'stale_refusals_%';

-- a queue with jobs is never deleted or truncated away (its accepted jobs
-- could no longer be claimed, nor found by id), and no queue is renamed or
-- renumbered (jobs name it, tokens carry its id): JS003, also for raw SQL
SELECT job_state.create_queue('q_del', concurrency_limit => 2, per_key_limit => 1);
SELECT job_id AS del_job FROM job_state.submit('q_del', '{}', concurrency_key => 'k') \gset
SELECT count(*) AS slots FROM job_state.slot WHERE scope = 'q_del';
\set VERBOSITY default
DELETE FROM job_state.queue WHERE name = 'q_del';
UPDATE job_state.queue SET name = 'q_renamed' WHERE name = 'q_del';
TRUNCATE job_state.queue;
\set VERBOSITY sqlstate
UPDATE job_state.queue SET id = id + 1000 WHERE name = 'q_del';
-- options may change by raw SQL (the table's checks apply)
UPDATE job_state.queue SET max_retries = 5 WHERE name = 'q_del';
-- a finished job still holds its queue; once purged, the queue can go,
-- and its slots go with it
SELECT token AS del_t FROM job_state.claim('q_del', 'w') \gset
SELECT job_state.succeed(:'del_t');
DELETE FROM job_state.queue WHERE name = 'q_del';
SELECT job_state.purge('0');
DELETE FROM job_state.queue WHERE name = 'q_del';
SELECT count(*) AS queues, (SELECT count(*) FROM job_state.slot WHERE scope = 'q_del') AS slots
  FROM job_state.queue WHERE name = 'q_del';
-- a job inserted earlier in the same transaction counts too
BEGIN;
SELECT job_state.create_queue('q_del2');
SELECT count(*) FROM job_state.submit('q_del2', '{}');
DELETE FROM job_state.queue WHERE name = 'q_del2';
ROLLBACK;
-- restore mode (superuser) replays or repairs a dump as it is
BEGIN;
SET LOCAL job_state.restore = on;
DELETE FROM job_state.queue WHERE name = 'q_default';
SELECT count(*) AS q_default_left FROM job_state.queue WHERE name = 'q_default';
TRUNCATE job_state.queue;
SELECT count(*) AS queues_left FROM job_state.queue;
ROLLBACK;
SELECT count(*) > 0 AS queues_back FROM job_state.queue;
