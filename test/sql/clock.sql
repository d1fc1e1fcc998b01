-- clock: a clock that steps back stalls nothing for longer than it
-- stepped, and nothing returns a time that has already passed.  A step is
-- simulated by writing stored times an hour ahead of now, as superuser.
\getenv abs_srcdir PG_ABS_SRCDIR
\i :abs_srcdir/sql/include/fresh_extension.sql
\set VERBOSITY sqlstate
SET timezone = 'UTC';

--
-- start-rate bucket: a shard whose refill time is ahead of now
--
SELECT job_state.create_queue('rated', retry_interval => '0', jitter => 'none');
SELECT job_state.create_resource('api', NULL, 1);	-- one shard, burst 1, 1 token/s
SELECT count(*) FROM job_state.submit('rated', '{"n": 1}', resource => 'api');
SELECT count(*) FROM job_state.submit('rated', '{"n": 2}', resource => 'api');
-- Defect: the shard is empty and was last refilled "an hour from now"; it
-- refilled from there, so no start for an hour and a second (the step and
-- the refill), and an empty shard was never written to move it back.
UPDATE job_state.bucket SET tokens = 0, refilled_at = now() + interval '1 hour'
 WHERE resource = 'api';
SELECT count(*) AS started FROM job_state.claim('rated', 'w');
-- the claim that found it moved its refill time back to now, tokens kept
SELECT tokens, refilled_at <= clock_timestamp() AS refilled_not_ahead
  FROM job_state.bucket WHERE resource = 'api';
-- so it refills from now: a second later a job starts
SELECT pg_sleep(1.1);
SELECT count(*) AS started FROM job_state.claim('rated', 'w');
-- a shard ahead of now that still holds a token gives it at once
UPDATE job_state.bucket SET tokens = 1, refilled_at = now() + interval '1 hour'
 WHERE resource = 'api';
SELECT count(*) FROM job_state.submit('rated', '{"n": 3}', resource => 'api');
SELECT count(*) AS started FROM job_state.claim('rated', 'w');
SELECT tokens, refilled_at <= clock_timestamp() AS refilled_not_ahead
  FROM job_state.bucket WHERE resource = 'api';

-- Defect: a refill time of -infinity (raw SQL) overflowed the elapsed time
-- to a negative one, so the shard never refilled and was never written
-- again: no start ever.  It is a full shard.
UPDATE job_state.bucket SET tokens = 0, refilled_at = '-infinity' WHERE resource = 'api';
SELECT count(*) FROM job_state.submit('rated', '{"n": 4}', resource => 'api');
SELECT count(*) AS started FROM job_state.claim('rated', 'w');
-- and one of +infinity is ahead of now: moved back to now
UPDATE job_state.bucket SET tokens = 0, refilled_at = 'infinity' WHERE resource = 'api';
SELECT count(*) AS started FROM job_state.claim('rated', 'w');
SELECT tokens, refilled_at <= clock_timestamp() AS refilled_not_ahead
  FROM job_state.bucket WHERE resource = 'api';

-- raw SQL cannot give a resource a rate the shards cannot hold (NaN and
-- Infinity pass the column's CHECK (> 0); the burst cast overflowed)
UPDATE job_state.resource SET max_starts_per_second = 'NaN' WHERE name = 'api';
UPDATE job_state.resource SET max_starts_per_second = 'Infinity' WHERE name = 'api';
UPDATE job_state.resource SET max_starts_per_second = 1e12 WHERE name = 'api';
\set VERBOSITY default
UPDATE job_state.resource SET max_starts_per_second = 'NaN' WHERE name = 'api';
\set VERBOSITY sqlstate
SELECT max_starts_per_second FROM job_state.resource WHERE name = 'api';

--
-- schedules: a last_tick, or the created_at of one that never ticked,
-- ahead of now
--
SELECT job_state.create_queue('cronq');
SELECT job_state.schedule('every-minute', '* * * * *', 'cronq', '{"s": 1}');
-- Defect: last_tick an hour ahead held every tick back for the hour and a
-- tick more.  Now the schedule is due at once: the latest tick is
-- submitted (or found already there) and last_tick moves back to it.
-- (one transaction: now() cannot pass a minute between the steps)
BEGIN;
UPDATE job_state.schedule SET last_tick = now() + interval '1 hour'
 WHERE name = 'every-minute';
SELECT job_state.sweep();
SELECT count(*) AS ticks FROM job_state.job WHERE queue = 'cronq';
SELECT last_tick = job_state.cron_prev(cron, now()) AS last_tick_is_latest
  FROM job_state.schedule WHERE name = 'every-minute';
SELECT idempotency_key = 'every-minute@' || to_char(job_state.cron_prev('* * * * *', now()),
                                                     'YYYY-MM-DD"T"HH24:MI"Z"') AS key_of_latest_tick
  FROM job_state.job WHERE queue = 'cronq';
-- the same tick again finds its job: no double
UPDATE job_state.schedule SET last_tick = now() + interval '1 hour'
 WHERE name = 'every-minute';
SELECT job_state.sweep();
SELECT count(*) AS ticks FROM job_state.job WHERE queue = 'cronq';
COMMIT;
SELECT job_state.unschedule('every-minute');

-- Defect: a schedule that never ticked, created "an hour from now", waited
-- for the clock to reach created_at (a daily one: a day more); it counts
-- from now instead.
SELECT job_state.create_queue('cronq2');
SELECT job_state.schedule('fresh', '* * * * *', 'cronq2', '{"s": 2}');
UPDATE job_state.schedule SET created_at = now() + interval '1 hour' WHERE name = 'fresh';
BEGIN;
SELECT job_state.sweep();
SELECT count(*) AS ticks FROM job_state.job WHERE queue = 'cronq2';
SELECT created_at = now() AS counts_from_now, last_tick = job_state.cron_prev(cron, now()) AS ticked
  FROM job_state.schedule WHERE name = 'fresh';
COMMIT;
-- one created in the past is left as it was
SELECT job_state.schedule('old', '0 0 1 1 *', 'cronq2', '{"s": 3}');
UPDATE job_state.schedule SET created_at = now() - interval '1 hour' WHERE name = 'old';
SELECT created_at AS old_created FROM job_state.schedule WHERE name = 'old' \gset
SELECT job_state.sweep();
SELECT created_at = :'old_created' AS unchanged, last_tick IS NULL AS not_ticked
  FROM job_state.schedule WHERE name = 'old';

--
-- heartbeat never returns an expiry that has already passed
--
-- its refusal as one line: SQLSTATE, message (job id masked), hint
CREATE FUNCTION pg_temp.heartbeat_error(t job_state.claim_token) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	msg text;
	hint text;
BEGIN
	PERFORM * FROM job_state.heartbeat(t, extend => '1 min');
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT, hint = PG_EXCEPTION_HINT;
	RETURN SQLSTATE || ': ' || regexp_replace(msg, 'job [0-9]+', 'job N') || ' | ' || hint;
END
$$;
SELECT job_state.create_queue('hb', lease => '1 hour', max_lease => '2 hours');
SELECT count(*) FROM job_state.submit('hb', '{"n": 1}');
SELECT token AS t1, job_id AS j1 FROM job_state.claim('hb', 'w') \gset
-- in range: the lease is extended into the future
SELECT lease_expires_at > clock_timestamp() AS in_future, cancel_requested
  FROM job_state.heartbeat(:'t1');
-- Defect: started_at + max_lease has passed while the lease still runs
-- (max_lease lowered since the claim, or the clock moved): heartbeat
-- returned started_at + max_lease, an hour ago, as the new expiry.
UPDATE job_state.job SET started_at = now() - interval '3 hours' WHERE id = :j1;
SELECT lease_expires_at > clock_timestamp() AS in_future
  FROM job_state.heartbeat(:'t1');
SELECT pg_temp.heartbeat_error(:'t1');
-- the lease the job holds is untouched, and the token still completes it
SELECT status, lease_expires_at > clock_timestamp() AS lease_runs
  FROM job_state.job WHERE id = :j1;
SELECT job_state.succeed(:'t1', '{"ok": true}');
SELECT status FROM job_state.job WHERE id = :j1;
-- the same after alter_queue lowers max_lease below the job's run time
SELECT count(*) FROM job_state.submit('hb', '{"n": 2}');
SELECT token AS t2, job_id AS j2 FROM job_state.claim('hb', 'w') \gset
UPDATE job_state.job SET started_at = now() - interval '10 min' WHERE id = :j2;
SELECT job_state.alter_queue('hb', max_lease => '5 min');
SELECT * FROM job_state.heartbeat(:'t2');
SELECT job_state.alter_queue('hb', max_lease => '2 hours');
SELECT lease_expires_at > clock_timestamp() AS in_future
  FROM job_state.heartbeat(:'t2');
