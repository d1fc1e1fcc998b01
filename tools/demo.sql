-- tools/demo.sql: a short narrated tour of job_state, run by tools/demo in a
-- throwaway database.  Every step checks that it behaved as narrated (the
-- refusals it shows, and the states, generations and counts it claims): an
-- unexpected outcome stops the demo with an error.  tools/demo counts the
-- steps ("=== N.") and names the one that failed; the last line it prints
-- when every step passed is "=== demo: every step behaved as narrated".
\set ON_ERROR_STOP on
\pset footer off
\set QUIET on
SET client_min_messages = warning;

-- expect(got, want): the demo stops unless the last error had SQLSTATE want
CREATE FUNCTION pg_temp.expect(got text, want text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
	IF got IS DISTINCT FROM want THEN
		RAISE EXCEPTION 'demo: expected SQLSTATE %, got %', want, coalesce(got, 'no error');
	END IF;
	RETURN 'refused with SQLSTATE ' || got || ', as expected';
END $$;

-- check(ok, what): the demo stops unless ok
CREATE FUNCTION pg_temp.check(ok boolean, what text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
	IF ok IS NOT TRUE THEN
		RAISE EXCEPTION 'demo: expected %', what;
	END IF;
	RETURN what || ', as expected';
END $$;

\echo
\echo '=== 1. A queue.  Leases are short here (1 second) so the demo can let one'
\echo '       run out.  on_lease_expiry => retry says the work is safe to repeat;'
\echo '       the default (unknown) would park the job for an operator instead.'
\echo
SELECT job_state.create_queue('emails',
	lease => '1 s', on_lease_expiry => 'retry',
	retry_interval => '1 s', backoff_rate => 2.0, jitter => 'none',
	max_retries => 3) AS "create_queue('emails')";

\echo
\echo '=== 2. Idempotent submit: the API handler may be called twice for the'
\echo '       same request.  Same idempotency key + same input = the same job.'
\echo
SELECT * FROM job_state.submit('emails', '{"to": "ada@example.com", "template": "welcome"}',
	idempotency_key => 'signup-1001');
SELECT * FROM job_state.submit('emails', '{"to": "ada@example.com", "template": "welcome"}',
	idempotency_key => 'signup-1001');

\echo
\echo '    The same key with a different input is a client bug, not a retry:'
\echo
\set LAST_ERROR_SQLSTATE none
\set ON_ERROR_STOP off
SELECT * FROM job_state.submit('emails', '{"to": "bob@example.com", "template": "welcome"}',
	idempotency_key => 'signup-1001');
\set ON_ERROR_STOP on
SELECT pg_temp.expect(:'LAST_ERROR_SQLSTATE', 'JS002') AS "submit, other input";
SELECT pg_temp.check(count(*) = 1, 'one job for the three submits') AS "check"
FROM job_state.job;

\echo
\echo '=== 3. Worker A claims the job.  The claim token carries the job id and'
\echo '       the generation, signed; every later call of worker A presents it.'
\echo
SELECT token AS a_token, job_id, attempt FROM job_state.claim('emails', 'worker-a') \gset
SELECT :'a_token' AS "worker A token", :job_id AS job_id, :attempt AS attempt,
	job_state.token_generation(:'a_token') AS generation;
SELECT pg_temp.check(:attempt = 1 AND job_state.token_generation(:'a_token') = 1,
	'attempt 1, generation 1') AS "check";

\echo
\echo '=== 4. Worker A stalls (a GC pause, a lost network) past its lease.'
\echo '       sweep() applies lease expiry (claim also does it on its own):'
\echo '       this queue retries, with its backoff.'
\echo
SELECT pg_sleep(1.2) \gset
SELECT job_state.sweep() AS "jobs whose lease expired";
SELECT id, status, generation, attempts, retries, reason,
	round(extract(epoch FROM run_after - clock_timestamp())::numeric, 1) AS "retry in (s)"
FROM job_state.job WHERE id = :job_id;
SELECT pg_temp.check(status = 'accepted' AND generation = 1 AND retries = 1,
	'the job waits for its retry (accepted, generation 1, retry 1)') AS "check"
FROM job_state.job WHERE id = :job_id;

\echo
\echo '=== 5. Worker B claims the job again: generation 2.'
\echo
SELECT pg_sleep(1.1) \gset
SELECT token AS b_token, attempt FROM job_state.claim('emails', 'worker-b') \gset
SELECT :'b_token' AS "worker B token", :attempt AS attempt,
	job_state.token_generation(:'b_token') AS generation;
SELECT pg_temp.check(:attempt = 2 AND job_state.token_generation(:'b_token') = 2,
	'attempt 2, generation 2') AS "check";

\echo
\echo '=== 6. Worker A wakes up and reports success with its old token.'
\echo '       It is fenced off: its generation is no longer the current one.'
\echo
\set LAST_ERROR_SQLSTATE none
\set ON_ERROR_STOP off
SELECT job_state.succeed(:'a_token', '{"message_id": "from-worker-a"}');
\set ON_ERROR_STOP on
SELECT pg_temp.expect(:'LAST_ERROR_SQLSTATE', 'JS001') AS "succeed, stale token";

\echo
\echo '    Business writes are fenced the same way: assert_claim() in the'
\echo '    worker''s own transaction refuses a stale token, so those writes'
\echo '    roll back with it.'
\echo
\set LAST_ERROR_SQLSTATE none
\set ON_ERROR_STOP off
BEGIN;
SELECT job_state.assert_claim(:'a_token');
ROLLBACK;
\set ON_ERROR_STOP on
SELECT pg_temp.expect(:'LAST_ERROR_SQLSTATE', 'JS001') AS "assert_claim, stale token";

\echo
\echo '=== 7. Worker B finishes; the job is succeeded (a final state).'
\echo
BEGIN;
SELECT job_state.assert_claim(:'b_token');
-- ... worker B''s own writes would go here, in the same transaction ...
SELECT job_state.succeed(:'b_token', '{"message_id": "from-worker-b"}');
COMMIT;
SELECT id, status, generation, attempts, worker, result FROM job_state.job WHERE id = :job_id;
SELECT pg_temp.check(status = 'succeeded' AND worker = 'worker-b'
		AND result = '{"message_id": "from-worker-b"}',
	'succeeded with worker B''s result') AS "check"
FROM job_state.job WHERE id = :job_id;

\echo
\echo '=== 8. A second job fails with a transient error (say an HTTP 503):'
\echo '       fail() schedules a retry by the queue policy and says so.'
\echo
SELECT job_id AS job2 FROM job_state.submit('emails', '{"to": "grace@example.com", "template": "welcome"}',
	idempotency_key => 'signup-1002') \gset
SELECT token AS c_token FROM job_state.claim('emails', 'worker-b') \gset
SELECT job_state.fail(:'c_token', 'transient', '{"http_status": 503}') AS "fail(transient) ->";
SELECT id, status, generation, attempts, retries, error_class, last_error,
	round(extract(epoch FROM run_after - clock_timestamp())::numeric, 1) AS "retry in (s)"
FROM job_state.job WHERE id = :job2;
SELECT pg_temp.check(status = 'accepted' AND retries = 1 AND error_class = 'transient'
		AND run_after > clock_timestamp(),
	'back to accepted, its retry scheduled') AS "check"
FROM job_state.job WHERE id = :job2;

\echo
\echo '=== 9. The jobs, and their history in job_state.job_event.'
\echo
SELECT id, queue, status, generation, attempts, retries, reason, worker
FROM job_state.job ORDER BY id;
SELECT job_id, from_status, to_status, generation, detail
FROM job_state.job_event ORDER BY seq;
-- The submit has no row: the job row records it (accepted_at, submitted_by).
SELECT pg_temp.check(string_agg(from_status || '>' || to_status, ' ' ORDER BY seq)
		= 'accepted>running running>accepted accepted>running running>succeeded',
	'the first job''s four changes after its submit, in order') AS "check"
FROM job_state.job_event WHERE job_id = :job_id;

\echo
\echo '=== 10. The rules hold for raw SQL too: a succeeded job cannot be reopened.'
\echo
\set LAST_ERROR_SQLSTATE none
\set ON_ERROR_STOP off
UPDATE job_state.job SET status = 'accepted' WHERE id = :job_id;
\set ON_ERROR_STOP on
SELECT pg_temp.expect(:'LAST_ERROR_SQLSTATE', 'JS003') AS "raw UPDATE of a succeeded job";
\echo
\echo '=== demo: every step behaved as narrated'
