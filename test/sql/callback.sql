-- waiting for a callback: wait_for_callback, callbacks by token, timeouts
\getenv abs_srcdir PG_ABS_SRCDIR
\i :abs_srcdir/sql/include/fresh_extension.sql
\set VERBOSITY sqlstate

SELECT job_state.create_queue('cb', jitter => 'none', max_retries => 0);
SELECT job_id AS j1 FROM job_state.submit('cb', '{"n": 1}') \gset
SELECT token AS t1 FROM job_state.claim('cb', 'w1') \gset

-- the wait: same generation, a callback timeout, the window up to it
SELECT status, callback_timeout_at - clock_timestamp() BETWEEN '59 min' AND '1 hour' AS in_an_hour,
       lease_expires_at = callback_timeout_at AS window_is_timeout
  FROM job_state.wait_for_callback(:'t1', '1 hour');
SELECT status, generation, attempts, finished_at IS NULL AS not_finished,
       started_at IS NOT NULL AS started, heartbeat_interval
  FROM job_state.job WHERE id = :j1;
-- called again (a retried request): the same window, nothing written
SELECT lease_expires_at AS window1 FROM job_state.job WHERE id = :j1 \gset
SELECT status, lease_expires_at = :'window1' AS same_window
  FROM job_state.wait_for_callback(:'t1', '5 min');
SELECT from_status, to_status, generation FROM job_state.job_event
 WHERE job_id = :j1 ORDER BY seq;
SELECT waiting, running, callback_timeouts FROM job_state.queue_stats WHERE queue = 'cb';

-- the callback: succeed with the token; sent twice with the same result,
-- harmless; with another result, refused
SELECT job_state.succeed(:'t1', '{"answer": 42}');
SELECT status, result, callback_timeout_at, heartbeat_interval, lease_expires_at
  FROM job_state.job WHERE id = :j1;
SELECT job_state.succeed(:'t1', '{"answer": 42}');
SELECT job_state.succeed(:'t1', '{"answer": 43}');
SELECT count(*) AS events FROM job_state.job_event WHERE job_id = :j1;
-- succeed_many reports the duplicate as done, too
SELECT outcome FROM job_state.succeed_many(ARRAY[:'t1']::job_state.claim_token[],
                                           ARRAY['{"answer": 42}']::jsonb[]);
-- the wait call after the callback reports it instead of failing
SELECT status, callback_timeout_at, lease_expires_at FROM job_state.wait_for_callback(:'t1', '1 hour');

-- fail sent twice with the same class and error: harmless, same answer
SELECT job_id AS j2 FROM job_state.submit('cb', '{"n": 2}') \gset
SELECT token AS t2 FROM job_state.claim('cb', 'w1') \gset
SELECT status FROM job_state.wait_for_callback(:'t2', '1 hour');
SELECT job_state.fail(:'t2', 'permanent', '{"e": "declined"}');
SELECT job_state.fail(:'t2', 'permanent', '{"e": "declined"}');
SELECT job_state.fail(:'t2', 'permanent', '{"e": "other"}');
SELECT job_state.succeed(:'t2');
SELECT status, reason FROM job_state.job WHERE id = :j2;

-- heartbeats move the window, never past the timeout
SELECT job_id AS j3 FROM job_state.submit('cb', '{"n": 3}') \gset
SELECT token AS t3 FROM job_state.claim('cb', 'w1') \gset
SELECT status, lease_expires_at - clock_timestamp() BETWEEN '9 min' AND '10 min' AS ten_minutes,
       callback_timeout_at - clock_timestamp() BETWEEN '119 min' AND '2 hours' AS two_hours
  FROM job_state.wait_for_callback(:'t3', '2 hours', heartbeat => '10 min');
SELECT heartbeat_interval FROM job_state.job WHERE id = :j3;
UPDATE job_state.job SET lease_expires_at = clock_timestamp() + interval '1 min' WHERE id = :j3;
SELECT lease_expires_at - clock_timestamp() BETWEEN '9 min' AND '10 min' AS ten_minutes_again,
       cancel_requested
  FROM job_state.heartbeat(:'t3');
SELECT lease_expires_at = (SELECT callback_timeout_at FROM job_state.job WHERE id = :j3) AS capped
  FROM job_state.heartbeat(:'t3', extend => '5 hours');
-- a heartbeat that is missed: the window closes, the job is unknown
UPDATE job_state.job SET lease_expires_at = clock_timestamp() - interval '1 s' WHERE id = :j3;
SELECT * FROM job_state.heartbeat(:'t3');
SELECT job_state.sweep() >= 1 AS swept;
SELECT status, reason, lease_expires_at, callback_timeout_at FROM job_state.job WHERE id = :j3;
SELECT * FROM job_state.heartbeat(:'t3');
SELECT waiting, callback_timeouts FROM job_state.queue_stats WHERE queue = 'cb';
-- a late callback with the current generation still resolves it
SELECT job_state.succeed(:'t3', '{"late": true}');
SELECT status, reason, result FROM job_state.job WHERE id = :j3;

-- the callback timeout: unknown, reason callback_timeout
SELECT job_id AS j4 FROM job_state.submit('cb', '{"n": 4}') \gset
SELECT token AS t4 FROM job_state.claim('cb', 'w1') \gset
SELECT status FROM job_state.wait_for_callback(:'t4', '10 ms');
SELECT pg_sleep(0.05);
SELECT * FROM job_state.heartbeat(:'t4');
SELECT job_state.sweep() >= 1 AS swept;
SELECT status, reason FROM job_state.job WHERE id = :j4;
SELECT status FROM job_state.wait_for_callback(:'t4', '1 hour');
SELECT from_status, to_status, detail->>'reason' AS reason FROM job_state.job_event
 WHERE job_id = :j4 ORDER BY seq;

-- a queue whose work is safe to repeat retries instead; the old token
-- then refers to an attempt that ended, the next claim's is newer
SELECT job_state.create_queue('cbr', on_lease_expiry => 'retry', retry_interval => '0 s',
       jitter => 'none', max_retries => 2);
SELECT job_id AS j5 FROM job_state.submit('cbr', '{"n": 5}') \gset
SELECT token AS t5 FROM job_state.claim('cbr', 'w1') \gset
SELECT status FROM job_state.wait_for_callback(:'t5', '10 ms');
SELECT pg_sleep(0.05);
SELECT job_state.sweep() >= 1 AS swept;
SELECT status, reason, retries, generation FROM job_state.job WHERE id = :j5;
SELECT job_state.succeed(:'t5');
SELECT token AS t5b FROM job_state.claim('cbr', 'w2') \gset
SELECT job_state.succeed(:'t5');
SELECT job_state.succeed(:'t5b');

-- cancel: a waiting job is cancelled at once; its late callback is refused
SELECT job_id AS j6 FROM job_state.submit('cb', '{"n": 6}') \gset
SELECT token AS t6 FROM job_state.claim('cb', 'w1') \gset
SELECT status FROM job_state.wait_for_callback(:'t6', '1 hour');
SELECT job_state.cancel(:j6, 'user gave up');
SELECT status, reason, callback_timeout_at, lease_expires_at FROM job_state.job WHERE id = :j6;
SELECT job_state.succeed(:'t6');

-- concurrency slots: kept while waiting, or given up with release_slots
SELECT job_state.create_queue('lim', concurrency_limit => 1);
SELECT count(*) FROM (SELECT job_state.submit('lim', jsonb_build_object('n', i))
                        FROM generate_series(1, 3) i) s;
SELECT token AS l1 FROM job_state.claim('lim', 'w') \gset
SELECT status FROM job_state.wait_for_callback(:'l1', '1 hour');
SELECT count(*) AS claimed_while_kept FROM job_state.claim('lim', 'w');
SELECT job_state.succeed(:'l1');
SELECT token AS l2 FROM job_state.claim('lim', 'w') \gset
SELECT status FROM job_state.wait_for_callback(:'l2', '1 hour', release_slots => true);
SELECT queue_slot FROM job_state.job WHERE status = 'waiting' AND queue = 'lim';
SELECT token AS l3 FROM job_state.claim('lim', 'w') \gset
SELECT count(*) AS slots_taken FROM job_state.slot WHERE scope = 'lim' AND job_id IS NOT NULL;
SELECT job_state.succeed(:'l2');
SELECT job_state.succeed(:'l3');
SELECT count(*) AS slots_taken FROM job_state.slot WHERE scope = 'lim' AND job_id IS NOT NULL;

-- the wait's own errors
SELECT job_id AS j7 FROM job_state.submit('cb', '{"n": 7}') \gset
SELECT token AS t7 FROM job_state.claim('cb', 'w1') \gset
SELECT * FROM job_state.wait_for_callback(NULL, '1 hour');
SELECT * FROM job_state.wait_for_callback(:'t7', NULL);
SELECT * FROM job_state.wait_for_callback(:'t7', '0 s');
SELECT * FROM job_state.wait_for_callback(:'t7', '-1 min');
SELECT * FROM job_state.wait_for_callback(:'t7', '11 years');
SELECT * FROM job_state.wait_for_callback(:'t7', '1 hour', heartbeat => '0 s');
SELECT * FROM job_state.wait_for_callback(:'t7', '1 hour', release_slots => NULL);
-- a lease that ran out: too late to hand the work over (succeed/fail still accepted)
UPDATE job_state.job SET lease_expires_at = clock_timestamp() - interval '1 s' WHERE id = :j7;
SELECT * FROM job_state.wait_for_callback(:'t7', '1 hour');
-- a newer generation
SELECT job_state.sweep() >= 1 AS swept;
SELECT job_state.reconcile(:j7, 'accepted');
SELECT token AS t7b FROM job_state.claim('cb', 'w1') \gset
SELECT * FROM job_state.wait_for_callback(:'t7', '1 hour');
SELECT status FROM job_state.wait_for_callback(:'t7b', '1 hour');
SELECT job_state.succeed(:'t7');
SELECT job_state.heartbeat(:'t7');

-- raw SQL follows the same rules
SELECT job_id AS j8 FROM job_state.submit('cb', '{"n": 8}') \gset
UPDATE job_state.job SET status = 'waiting', callback_timeout_at = now() + '1 h',
       lease_expires_at = now() + '1 h' WHERE id = :j8;
SELECT token AS t8 FROM job_state.claim('cb', 'w1') \gset
UPDATE job_state.job SET status = 'waiting' WHERE id = :j8;
UPDATE job_state.job SET status = 'waiting', callback_timeout_at = clock_timestamp() + '1 h',
       lease_expires_at = clock_timestamp() + '2 h' WHERE id = :j8;
UPDATE job_state.job SET status = 'waiting', callback_timeout_at = clock_timestamp() + '1 h',
       heartbeat_interval = '-1 s' WHERE id = :j8;
UPDATE job_state.job SET status = 'waiting', callback_timeout_at = clock_timestamp() + '1 h'
 WHERE id = :j8;
SELECT status, lease_expires_at <= callback_timeout_at AS window_ok FROM job_state.job WHERE id = :j8;
UPDATE job_state.job SET callback_timeout_at = callback_timeout_at + '1 h' WHERE id = :j8;
UPDATE job_state.job SET heartbeat_interval = '1 min' WHERE id = :j8;
UPDATE job_state.job SET status = 'running' WHERE id = :j8;
UPDATE job_state.job SET status = 'succeeded' WHERE id = :j8;
SELECT status, callback_timeout_at, lease_expires_at FROM job_state.job WHERE id = :j8;

-- the callback privilege: succeed, fail and heartbeat with a token, nothing else
SET client_min_messages = warning;
DROP ROLE IF EXISTS regress_js_callback, regress_js_stranger;
RESET client_min_messages;
CREATE ROLE regress_js_callback;
CREATE ROLE regress_js_stranger;
GRANT USAGE ON SCHEMA job_state TO regress_js_callback, regress_js_stranger;
GRANT EXECUTE ON FUNCTION job_state.succeed(job_state.claim_token, jsonb),
	job_state.heartbeat(job_state.claim_token, interval, jsonb),
	job_state.fail(job_state.claim_token, job_state.error_class, jsonb, interval),
	job_state.claim(text, text, interval, int),
	job_state.wait_for_callback(job_state.claim_token, interval, interval, boolean),
	job_state.begin_operation(job_state.claim_token, text)
	TO regress_js_callback, regress_js_stranger;
SELECT job_state.revoke_queue('cb', 'public', 'all');
SELECT job_state.grant_queue('cb', 'regress_js_callback', 'callback');
SELECT grantee, privilege FROM job_state.queue_privileges WHERE queue = 'cb' ORDER BY 1, 2;
SELECT job_state.has_queue_privilege('regress_js_callback', 'cb', 'callback') AS may_call_back,
       job_state.has_queue_privilege('regress_js_callback', 'cb', 'claim') AS may_claim;
SELECT job_id AS j9 FROM job_state.submit('cb', '{"n": 9}') \gset
SELECT token AS t9 FROM job_state.claim('cb', 'w1') \gset
SELECT status FROM job_state.wait_for_callback(:'t9', '1 hour', heartbeat => '5 min');
SET ROLE regress_js_stranger;
SELECT job_state.succeed(:'t9');
SELECT * FROM job_state.heartbeat(:'t9');
SET ROLE regress_js_callback;
SELECT * FROM job_state.claim('cb', 'x');
SELECT * FROM job_state.wait_for_callback(:'t9', '1 hour');
SELECT * FROM job_state.begin_operation(:'t9', 'op');
SELECT cancel_requested FROM job_state.heartbeat(:'t9');
SELECT job_state.succeed(:'t9', '{"approved": true}');
RESET ROLE;
SELECT status, result FROM job_state.job WHERE id = :j9;

-- no token text in the history, nor in any error's message, detail or hint
SELECT count(*) AS token_in_history FROM job_state.job_event
 WHERE detail::text LIKE '%' || :'t5' || '%' OR detail::text LIKE '%' || :'t9' || '%';
SELECT job_id AS j10 FROM job_state.submit('cb', '{"n": 10}') \gset
\set VERBOSITY terse
DO $$
DECLARE
	t text := (SELECT token::text FROM job_state.claim('cb', 'w1'));
	msg text;
	det text;
	hint text;
	leaks int := 0;
BEGIN
	PERFORM job_state.wait_for_callback(t::job_state.claim_token, '10 ms');
	PERFORM pg_sleep(0.05);
	FOR i IN 1..3 LOOP
		BEGIN
			IF i = 1 THEN
				PERFORM job_state.heartbeat(t::job_state.claim_token);
			ELSIF i = 2 THEN
				PERFORM job_state.wait_for_callback(t::job_state.claim_token, '1 hour');
			ELSE
				PERFORM job_state.succeed(t::job_state.claim_token, '{"a": 1}');
				PERFORM job_state.succeed(t::job_state.claim_token, '{"a": 2}');
			END IF;
		EXCEPTION WHEN OTHERS THEN
			GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL,
				hint = PG_EXCEPTION_HINT;
			IF strpos(msg || det || coalesce(hint, ''), t) > 0 THEN
				leaks := leaks + 1;
			END IF;
			RAISE NOTICE 'error % checked', i;
		END;
	END LOOP;
	RAISE NOTICE 'errors that show the token: %', leaks;
END $$;
\set VERBOSITY sqlstate
DROP OWNED BY regress_js_callback, regress_js_stranger;
DROP ROLE regress_js_callback, regress_js_stranger;
