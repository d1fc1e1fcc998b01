-- retention: a queue deletes its finished jobs, with all their rows, once they are old enough
\getenv abs_srcdir PG_ABS_SRCDIR
\i :abs_srcdir/sql/include/fresh_extension.sql
\set VERBOSITY sqlstate

-- the option: NULL (the default) keeps jobs until purge; '0' turns it off
SELECT job_state.create_queue('r');
SELECT retention FROM job_state.queue WHERE name = 'r';
SELECT job_state.alter_queue('r', retention => '7 days');
SELECT retention FROM job_state.queue WHERE name = 'r';
SELECT job_state.alter_queue('r', max_retries => 5);
SELECT retention, max_retries FROM job_state.queue WHERE name = 'r';
SELECT job_state.alter_queue('r', retention => '0');
SELECT retention FROM job_state.queue WHERE name = 'r';
SELECT job_state.create_queue('r2', retention => '1 min');
SELECT retention FROM job_state.queue WHERE name = 'r2';
SELECT job_state.create_queue('r3', retention => '0');
SELECT retention FROM job_state.queue WHERE name = 'r3';
-- bounds: at least job_state.min_retention (one minute), at most 3600 days
SELECT job_state.create_queue('bad', retention => '-1 s');
SELECT job_state.create_queue('bad', retention => '59 s');
SELECT job_state.create_queue('bad', retention => '3601 days');
SELECT job_state.alter_queue('r', retention => '11 years');
SELECT job_state.alter_queue('r', retention => '1 s');
\set VERBOSITY default
SELECT job_state.alter_queue('r', retention => '30 s');
\set VERBOSITY sqlstate
SELECT count(*) AS no_queue_bad FROM job_state.queue WHERE name = 'bad';
SELECT job_state.alter_queue('nope', retention => '1 day');
-- raw SQL is held to the table's bounds (1 s to 3600 days)
UPDATE job_state.queue SET retention = '0' WHERE name = 'r';
UPDATE job_state.queue SET retention = '3601 days' WHERE name = 'r';
-- only a superuser lowers the floor
CREATE ROLE retention_tenant;
SET ROLE retention_tenant;
SET job_state.min_retention = 1;
RESET ROLE;
DROP ROLE retention_tenant;
SET job_state.min_retention = 0;
SET job_state.min_retention = 61;

-- what goes and what stays
SET job_state.min_retention = 1;
SELECT job_state.alter_queue('r', retention => '1 s', retry_interval => '0', jitter => 'none', max_retries => 0);
SELECT job_state.create_queue('forever');
SELECT count(*) FROM (SELECT job_state.submit('r', jsonb_build_object('n', i), 'k' || i,
		budget => '{"usd": 100}') FROM generate_series(1, 7) i) s;
SELECT job_id AS f FROM job_state.submit('forever', '{"n": 0}') \gset
CREATE TEMP TABLE toks AS SELECT token, job_id FROM job_state.claim('r', 'w', max_jobs => 6);
SELECT job_state.succeed(token) FROM job_state.claim('forever', 'w');
-- job 1 succeeds with spend and an operation; 2 fails; 3 is cancelled; 4 ends unknown; 5 runs; 6 runs with a cancel request; 7 waits
SELECT job_state.charge(token, 'usd', 3) AS usd_left FROM toks WHERE job_id = 1;
SELECT state FROM toks, job_state.begin_operation(token, 'send-mail') WHERE job_id = 1;
SELECT job_state.finish_operation(token, 'send-mail', '{"id": "m-1"}') FROM toks WHERE job_id = 1;
SELECT job_state.succeed(token) FROM toks WHERE job_id = 1;
SELECT job_state.fail(token, 'permanent') FROM toks WHERE job_id = 2;
SELECT job_state.fail(token, 'unknown') FROM toks WHERE job_id = 3;
SELECT job_state.reconcile(3, 'failed');
SELECT job_state.redrive(3);
SELECT job_state.cancel(3, 'not needed');
UPDATE job_state.job SET lease_expires_at = clock_timestamp() - interval '1 s' WHERE id = 4;
SELECT job_state.cancel(6);
SELECT id, status FROM job_state.job ORDER BY id;
-- nothing is old enough yet: sweep() moves the expired lease of job 4 and deletes nothing
SELECT job_state.sweep() AS moved_or_deleted;
SELECT count(*) AS jobs FROM job_state.job;
SELECT pg_sleep(1.2);
-- now succeeded 1, failed 2 and cancelled 3 go; unknown 4, running 5 and 6, accepted 7 and the other queue's job stay
SELECT job_state.sweep() AS moved_or_deleted;
SELECT id, queue, status FROM job_state.job ORDER BY id;
SELECT count(*) AS events_left FROM job_state.job_event WHERE job_id <= 3;
SELECT count(*) AS spend_left FROM job_state.spend;
SELECT count(*) AS operations_left FROM job_state.operation;
SELECT count(*) AS events_kept FROM job_state.job_event WHERE job_id > 3;
SELECT job_state.sweep() AS moved_or_deleted;
-- the idempotency key of a job retention deleted can be used again
SELECT created, status FROM job_state.submit('r', '{"other": true}', 'k1');
-- history is still append-only for everyone else
DELETE FROM job_state.job_event WHERE job_id = :f;
DELETE FROM job_state.job WHERE id = :f;
-- a job that finished later than its queue's retention ago stays
SELECT job_state.succeed(token) FROM toks WHERE job_id = 5;
SELECT job_state.sweep() AS moved_or_deleted;
SELECT status FROM job_state.job WHERE id = 5;
-- turning retention off keeps it
SELECT job_state.alter_queue('r', retention => '0');
SELECT pg_sleep(1.2);
SELECT job_state.sweep() AS moved_or_deleted;
SELECT status FROM job_state.job WHERE id = 5;

-- batches: one sweep() deletes at most 1000 jobs; the next one the rest
SELECT job_state.alter_queue('r', retention => '1 s');
SELECT count(*) FROM (SELECT job_state.submit('r', jsonb_build_object('b', i)) FROM generate_series(1, 1003) i) s;
SELECT count(*) FILTER (WHERE outcome = 'succeeded') AS succeeded
  FROM job_state.succeed_many(ARRAY(SELECT token FROM job_state.claim('r', 'batch', max_jobs => 1010)));
SELECT pg_sleep(1.2);
SELECT job_state.sweep() AS deleted;
SELECT job_state.sweep() AS deleted;
SELECT job_state.sweep() AS deleted;
SELECT status, count(*) FROM job_state.job GROUP BY status ORDER BY status;
RESET job_state.min_retention;

-- purge still deletes everything finished, with its rows, in the same statement
SELECT job_state.purge('0') AS purged;
SELECT count(*) AS events_of_purged FROM job_state.job_event e
 WHERE NOT EXISTS (SELECT FROM job_state.job j WHERE j.queue = e.queue AND j.id = e.job_id);
