-- job_state.wait(job_id, timeout): the outcome of a job once it has ended,
-- or its state when the timeout passes; who may wait; where it may not
\getenv abs_srcdir PG_ABS_SRCDIR
\i :abs_srcdir/sql/include/fresh_extension.sql
SET client_min_messages = warning;
DROP ROLE IF EXISTS regress_js_wait_owner, regress_js_wait_other, regress_js_wait_reader;
DROP TABLE IF EXISTS wait_toks;
RESET client_min_messages;
-- a wait that goes wrong ends the test, not the run
SET statement_timeout = '60 s';
\set VERBOSITY sqlstate

SELECT job_state.create_queue('wq', max_retries => 0);
SELECT job_id, created, status FROM job_state.submit('wq', '{"n": 1}');
SELECT job_id, created, status FROM job_state.submit('wq', '{"n": 2}');
SELECT job_id, created, status FROM job_state.submit('wq', '{"n": 3}');
-- finished_at as a flag, so that the expected output does not hold times
-- (a procedure that may commit: CALL in autocommit, as wait() itself)
CREATE PROCEDURE wait_for(id bigint, t interval, OUT status job_state.status,
	OUT result jsonb, OUT last_error jsonb, OUT reason text, OUT finished boolean)
	LANGUAGE plpgsql AS $$
DECLARE
	f timestamptz;
BEGIN
	CALL job_state.wait(id, t, status, result, last_error, reason, f);
	finished := f IS NOT NULL;
END $$;
CREATE TABLE wait_toks AS SELECT token, job_id FROM job_state.claim('wq', 'w', max_jobs => 2);

-- timeout 0 is a poll: the current state at once
CALL job_state.wait(1, '0', NULL, NULL, NULL, NULL, NULL);
-- a running job that does not end: its state after the timeout
SELECT clock_timestamp() AS t0 \gset
CALL job_state.wait(1, '200 ms', NULL, NULL, NULL, NULL, NULL);
SELECT clock_timestamp() - :'t0'::timestamptz >= interval '200 ms' AS waited_the_timeout;

-- a job that has ended: its outcome at once, however long the timeout
SELECT job_state.succeed(token, '{"answer": 42}') FROM wait_toks WHERE job_id = 1;
SELECT job_state.fail(token, 'permanent', '{"msg": "bad input"}') FROM wait_toks WHERE job_id = 2;
SELECT job_state.cancel(3, 'not needed');
SELECT clock_timestamp() AS t0 \gset
CALL wait_for(1, '30 s', NULL, NULL, NULL, NULL, NULL);
SELECT status, result, last_error, reason, finished_at IS NOT NULL AS finished
  FROM job_state.job WHERE id = 2;
CALL wait_for(2, '30 s', NULL, NULL, NULL, NULL, NULL);
CALL wait_for(3, '30 s', NULL, NULL, NULL, NULL, NULL);
SELECT clock_timestamp() - :'t0'::timestamptz < interval '10 s' AS returned_at_once;
-- the longest timeout is 1 hour
CALL wait_for(1, '1 hour', NULL, NULL, NULL, NULL, NULL);
CALL job_state.wait(1, '30 days', NULL, NULL, NULL, NULL, NULL);

-- unknown ends a wait too (the outcome is for an operator to find out)
SELECT job_id, created, status FROM job_state.submit('wq', '{"n": 4}');
SELECT job_state.fail(token, 'unknown', '{"msg": "timed out"}') FROM job_state.claim('wq', 'w');
CALL wait_for(4, '30 s', NULL, NULL, NULL, NULL, NULL);

-- arguments
CALL job_state.wait(999, '0', NULL, NULL, NULL, NULL, NULL);
CALL job_state.wait(NULL, '1 s', NULL, NULL, NULL, NULL, NULL);
CALL job_state.wait(1, NULL, NULL, NULL, NULL, NULL, NULL);
CALL job_state.wait(1, '-1 s', NULL, NULL, NULL, NULL, NULL);
CALL job_state.wait(1, '1 hour 1 second', NULL, NULL, NULL, NULL, NULL);
CALL job_state.wait(1, '2 months -59 days', NULL, NULL, NULL, NULL, NULL);
\set VERBOSITY default
CALL job_state.wait(1, '2 hours', NULL, NULL, NULL, NULL, NULL);
\set VERBOSITY sqlstate

-- where wait() cannot commit between reads, it may only poll (timeout 0)
BEGIN;
CALL wait_for(1, '0', NULL, NULL, NULL, NULL, NULL);
\set VERBOSITY default
CALL job_state.wait(1, '1 s', NULL, NULL, NULL, NULL, NULL);
\set VERBOSITY sqlstate
ROLLBACK;
CREATE FUNCTION wait_in_function(t interval) RETURNS job_state.status
	LANGUAGE plpgsql AS $$
DECLARE
	s job_state.status;
	r jsonb;
	e jsonb;
	re text;
	f timestamptz;
BEGIN
	CALL job_state.wait(1, t, s, r, e, re, f);
	RETURN s;
END $$;
SELECT wait_in_function('0');
SELECT wait_in_function('1 s');
SET default_transaction_isolation = 'repeatable read';
CALL wait_for(1, '0', NULL, NULL, NULL, NULL, NULL);
\set VERBOSITY default
CALL job_state.wait(1, '1 s', NULL, NULL, NULL, NULL, NULL);
\set VERBOSITY sqlstate
SET default_transaction_isolation = 'serializable';
CALL job_state.wait(1, '1 s', NULL, NULL, NULL, NULL, NULL);
RESET default_transaction_isolation;
-- a DO block in autocommit may commit: wait() works there
\set VERBOSITY default
DO $$
DECLARE
	s job_state.status;
	r jsonb;
	e jsonb;
	re text;
	f timestamptz;
BEGIN
	CALL job_state.wait(1, '1 s', s, r, e, re, f);
	RAISE NOTICE 'status %, result %', s, r;
END $$;
\set VERBOSITY sqlstate

-- who may wait: the submitter, or a role that may read the queue; any
-- other role gets the error of a job that does not exist
CREATE ROLE regress_js_wait_owner;
CREATE ROLE regress_js_wait_other;
CREATE ROLE regress_js_wait_reader;
GRANT USAGE ON SCHEMA job_state TO regress_js_wait_owner, regress_js_wait_other,
	regress_js_wait_reader;
GRANT EXECUTE ON FUNCTION job_state.submit(text, jsonb, text, timestamptz, int, int,
	timestamptz, jsonb, text, text) TO regress_js_wait_owner;
GRANT EXECUTE ON PROCEDURE job_state.wait(bigint, interval, job_state.status, jsonb,
	jsonb, text, timestamptz) TO regress_js_wait_owner, regress_js_wait_other,
	regress_js_wait_reader;
GRANT EXECUTE ON PROCEDURE wait_for(bigint, interval, job_state.status, jsonb,
	jsonb, text, boolean) TO regress_js_wait_other, regress_js_wait_reader;
SELECT job_state.create_queue('private');
SELECT job_state.grant_queue('private', 'regress_js_wait_owner', 'submit');
SELECT job_state.grant_queue('private', 'regress_js_wait_reader', 'read');
SELECT job_state.revoke_queue('private', 'public', 'all');
SET ROLE regress_js_wait_owner;
SELECT job_id, created, status FROM job_state.submit('private', '{"secret": true}');
CALL job_state.wait(5, '0', NULL, NULL, NULL, NULL, NULL);
SET ROLE regress_js_wait_other;
CALL job_state.wait(5, '0', NULL, NULL, NULL, NULL, NULL);
\set VERBOSITY default
CALL job_state.wait(5, '1 s', NULL, NULL, NULL, NULL, NULL);
CALL job_state.wait(998, '1 s', NULL, NULL, NULL, NULL, NULL);
\set VERBOSITY sqlstate
-- job 1 is in an open queue (never granted on): anyone may read it
CALL wait_for(1, '0', NULL, NULL, NULL, NULL, NULL);
SET ROLE regress_js_wait_reader;
CALL job_state.wait(5, '0', NULL, NULL, NULL, NULL, NULL);
RESET ROLE;
-- a revoke reaches the next read
SELECT job_state.revoke_queue('private', 'regress_js_wait_reader', 'read');
SET ROLE regress_js_wait_reader;
CALL job_state.wait(5, '0', NULL, NULL, NULL, NULL, NULL);
RESET ROLE;
-- EXECUTE on the procedure is granted by role, not to PUBLIC
SELECT has_function_privilege('public', p.oid, 'EXECUTE') AS public_may_wait
  FROM pg_proc p WHERE p.oid = 'job_state.wait'::regproc;

-- the poll interval's bounds
SET job_state.wait_poll_interval = '5 ms';
SET job_state.wait_poll_interval = '11 s';
SET job_state.wait_poll_interval = '10 ms';
SELECT clock_timestamp() AS t0 \gset
CALL job_state.wait(5, '100 ms', NULL, NULL, NULL, NULL, NULL);
SELECT clock_timestamp() - :'t0'::timestamptz < interval '10 s' AS polled;
RESET job_state.wait_poll_interval;

DROP TABLE wait_toks;
DROP FUNCTION wait_in_function(interval);
DROP PROCEDURE wait_for(bigint, interval, job_state.status, jsonb, jsonb, text, boolean);
SET client_min_messages = warning;
SET job_state.drop_live_jobs = on;
DROP EXTENSION job_state CASCADE;
RESET job_state.drop_live_jobs;
RESET client_min_messages;
DROP ROLE regress_js_wait_owner, regress_js_wait_other, regress_js_wait_reader;
CREATE EXTENSION job_state;
