-- succeed, succeed_many, fail and the retry policy
\getenv abs_srcdir PG_ABS_SRCDIR
\i :abs_srcdir/sql/include/fresh_extension.sql
\set VERBOSITY sqlstate

-- fail classes
SELECT job_state.create_queue('fq', retry_interval => '10 s', backoff_rate => 2,
       max_delay => '1 hour', jitter => 'none', max_retries => 3);
SELECT count(*) FROM (SELECT job_state.submit('fq', jsonb_build_object('n', i)) FROM generate_series(1, 4) i) s;
SELECT token AS t1 FROM job_state.claim('fq', 'w') \gset
SELECT token AS t2 FROM job_state.claim('fq', 'w') \gset
SELECT token AS t3 FROM job_state.claim('fq', 'w') \gset
SELECT token AS t4 FROM job_state.claim('fq', 'w') \gset
SELECT job_state.fail(:'t1', 'permanent', '{"msg": "bad input"}');
SELECT job_state.fail(:'t2', 'unknown', '{"msg": "timeout talking to the model"}');
SELECT job_state.fail(:'t3', 'transient', '{"msg": "503"}');
SELECT job_state.fail(:'t4', 'throttled', '{"msg": "429"}', retry_after => '42 s');
SELECT id, status, reason, error_class, last_error, retries, throttles,
       round(extract(epoch FROM run_after - clock_timestamp())) AS wait_s
  FROM job_state.job ORDER BY id;
-- argument errors
SELECT job_state.fail(:'t3', NULL);
SELECT job_state.fail(NULL, 'transient');
SELECT job_state.fail(:'t3', 'transient', retry_after => '-1 s');
SELECT job_state.fail(:'t3', 'nonsense');

-- exact backoff with jitter off: 10 s, 20 s, 40 s, then retries are exhausted
SELECT job_state.create_queue('bo', retry_interval => '10 s', backoff_rate => 2,
       max_delay => '35 s', jitter => 'none', max_retries => 3);
SELECT job_id FROM job_state.submit('bo', '{}');
CREATE TABLE waits (n int, status text, reason text, wait_s numeric);
DO $$
DECLARE
	t job_state.claim_token;
	s job_state.status;
BEGIN
	FOR i IN 1..4 LOOP
		UPDATE job_state.job SET run_after = now() WHERE queue = 'bo' AND status = 'accepted';
		SELECT token INTO t FROM job_state.claim('bo', 'w');
		s := job_state.fail(t, 'transient');
		INSERT INTO waits SELECT i, status, reason,
			round(extract(epoch FROM run_after - clock_timestamp()))
		  FROM job_state.job WHERE queue = 'bo';
	END LOOP;
END $$;
SELECT * FROM waits ORDER BY n;
SELECT attempts, retries FROM job_state.job WHERE queue = 'bo';

-- the policy itself: min(interval * rate^(n-1), max_delay), AWS Step Functions
SELECT n, job_state.retry_delay('2 s', 2.0, '30 s', 'none', n) FROM generate_series(1, 6) n;
SELECT job_state.retry_delay('1 s', 1.0, '30 s', 'none', 50) AS constant;
SELECT job_state.retry_delay('1 s', 1000, '1 hour', 'none', 1000) AS capped;
SELECT job_state.retry_delay('1 s', 2, '30 s', 'maybe', 1);
SELECT job_state.retry_delay('1 s', 2, '30 s', 'none', 0);
-- full jitter: uniform over [0, cap]; 200 draws stay inside and are not all equal
SELECT n, min(d) >= '0 s' AS above_zero,
       max(d) <= least(interval '2 s' * 2 ^ (n - 1), interval '30 s') AS below_cap,
       count(DISTINCT d) > 100 AS spread
  FROM generate_series(1, 5) n,
       LATERAL (SELECT job_state.retry_delay('2 s', 2.0, '30 s', 'full', n) AS d
                  FROM generate_series(1, 200)) draws
 GROUP BY n ORDER BY n;
-- the worked example of the README: 2 s, rate 2, full jitter: [0,2], [0,4], [0,8]
SELECT n, max(d) <= interval '1 s' * 2 ^ n AS within
  FROM generate_series(1, 3) n,
       LATERAL (SELECT job_state.retry_delay('2 s', 2.0, '30 s', 'full', n) AS d
                  FROM generate_series(1, 200)) draws
 GROUP BY n ORDER BY n;

-- succeed_many: one call, each token fenced on its own
SELECT job_state.create_queue('batch');
SELECT count(*) FROM (SELECT job_state.submit('batch', jsonb_build_object('n', i)) FROM generate_series(1, 5) i) s;
CREATE TABLE batch_tokens AS SELECT token, job_id FROM job_state.claim('batch', 'w', max_jobs => 5);
-- make job 2 of the batch stale: expire, sweep, redrive (bumps the generation)
UPDATE job_state.job SET lease_expires_at = clock_timestamp() - interval '1 s'
 WHERE id = (SELECT min(job_id) + 1 FROM batch_tokens);
SELECT job_state.sweep();
SELECT job_state.redrive((SELECT min(job_id) + 1 FROM batch_tokens));
SELECT b.job_id - (SELECT min(job_id) FROM batch_tokens) AS nth, s.outcome
  FROM job_state.succeed_many((SELECT array_agg(token ORDER BY job_id) FROM batch_tokens),
       (SELECT array_agg(jsonb_build_object('r', job_id) ORDER BY job_id) FROM batch_tokens)) s
  JOIN batch_tokens b ON b.token OPERATOR(job_state.=) s.token
 ORDER BY 1;
SELECT status, count(*) FROM job_state.job WHERE queue = 'batch' GROUP BY status ORDER BY status;
SELECT count(*) AS with_results FROM job_state.job WHERE queue = 'batch' AND result ? 'r';
-- a second call: all stale now
SELECT outcome, count(*) FROM job_state.succeed_many((SELECT array_agg(token) FROM batch_tokens)) GROUP BY outcome;
SELECT count(*) FROM job_state.succeed_many('{}');
SELECT * FROM job_state.succeed_many((SELECT array_agg(token) FROM batch_tokens), '{}');
SELECT * FROM job_state.succeed_many(ARRAY[NULL]::job_state.claim_token[]);
SELECT * FROM job_state.succeed_many(NULL);
SELECT * FROM job_state.succeed_many((SELECT array_agg(ARRAY[token, token]) FROM batch_tokens));
-- out of order, and a token given twice: it counts as its first, and the
-- outcomes come back in the order given
SELECT count(*) FROM (SELECT job_state.submit('batch', jsonb_build_object('m', i)) FROM generate_series(1, 2) i) s;
CREATE TABLE pair AS SELECT token, job_id FROM job_state.claim('batch', 'w', max_jobs => 2);
SELECT p.job_id - (SELECT min(job_id) FROM pair) AS nth, s.outcome
  FROM job_state.succeed_many(ARRAY[(SELECT token FROM pair ORDER BY job_id DESC LIMIT 1),
                                    (SELECT token FROM pair ORDER BY job_id LIMIT 1),
                                    (SELECT token FROM pair ORDER BY job_id DESC LIMIT 1)]) WITH ORDINALITY s(token, outcome, ord)
  JOIN pair p ON p.token OPERATOR(job_state.=) s.token
 ORDER BY s.ord;
SELECT count(*) AS succeeded_once FROM job_state.job_event e JOIN pair p ON p.job_id = e.job_id
 WHERE e.to_status = 'succeeded';

-- a cancel request wins over a retry; succeed still wins over a cancel request
SELECT job_state.create_queue('cx');
SELECT job_id FROM job_state.submit('cx', '{"n": 1}');
SELECT job_id FROM job_state.submit('cx', '{"n": 2}');
SELECT token AS c1 FROM job_state.claim('cx', 'w') \gset
SELECT token AS c2 FROM job_state.claim('cx', 'w') \gset
SELECT job_state.cancel(job_state.token_job(:'c1'), 'user gave up');
SELECT job_state.cancel(job_state.token_job(:'c2'));
SELECT cancel_requested FROM job_state.heartbeat(:'c1');
SELECT job_state.fail(:'c1', 'transient');
SELECT job_state.succeed(:'c2', '{"done": 1}');
SELECT id, status, reason, cancel_requested, error_class, retries, run_after = accepted_at AS not_delayed
  FROM job_state.job WHERE queue = 'cx' ORDER BY id;

-- the history of a job, written by the statements themselves or by the
-- trigger, once per change, whatever the path
SELECT job_state.create_queue('hist', retry_interval => '0', jitter => 'none');
SELECT job_id AS h FROM job_state.submit('hist', '{}') \gset
SELECT job_state.fail(token, 'transient') FROM job_state.claim('hist', 'w1');
SELECT job_state.fail(token, 'unknown') FROM job_state.claim('hist', 'w2');
SELECT job_state.reconcile(:h, 'accepted');
SELECT token AS ht FROM job_state.claim('hist', 'w3') \gset
UPDATE job_state.job SET lease_expires_at = clock_timestamp() - interval '1 s' WHERE id = :h;
SELECT job_state.sweep();
SELECT job_state.succeed(:'ht');
SELECT job_id AS h2 FROM job_state.submit('hist', '{"n": 2}') \gset
SELECT outcome FROM job_state.succeed_many(ARRAY(SELECT token FROM job_state.claim('hist', 'w4')));
SELECT job_id, from_status, to_status, generation, detail FROM job_state.job_event
 WHERE job_id IN (:h, :h2) ORDER BY seq;
-- with job_state.track_events off, no path writes history
SET job_state.track_events = off;
SELECT job_id AS h3 FROM job_state.submit('hist', '{"n": 3}') \gset
SELECT job_state.succeed(token) FROM job_state.claim('hist', 'w5');
RESET job_state.track_events;
SELECT count(*) AS events_of_h3 FROM job_state.job_event WHERE job_id = :h3;

-- a late fail with the current generation resolves unknown as well: a
-- throttled one is retried and counted as a throttle
SELECT job_state.create_queue('lf', retry_interval => '1 hour', max_delay => '1 hour',
       jitter => 'none');
SELECT job_id FROM job_state.submit('lf', '{"n": 1}');
SELECT token AS lf FROM job_state.claim('lf', 'w') \gset
UPDATE job_state.job SET lease_expires_at = clock_timestamp() - interval '1 s' WHERE queue = 'lf';
SELECT job_state.sweep() >= 1 AS swept;
SELECT status, reason FROM job_state.job WHERE queue = 'lf';
SELECT job_state.fail(:'lf', 'throttled', '{"msg": "late 429"}');
SELECT status, reason, error_class, last_error, retries, throttles, generation,
       round(extract(epoch FROM run_after - clock_timestamp()) / 60) AS wait_min
  FROM job_state.job WHERE queue = 'lf';
-- and the token is spent
SELECT job_state.fail(:'lf', 'transient');

-- with the queue row deleted (raw SQL, restore mode) its tokens name a
-- queue that is gone: fail is JS008 whatever the class, in this backend
-- (whose caches knew the queue) as in a new one
SELECT job_state.create_queue('gone');
SELECT count(*) FROM (SELECT job_state.submit('gone', jsonb_build_object('n', i)) FROM generate_series(1, 2) i) s;
SELECT token AS g1 FROM job_state.claim('gone', 'w') \gset
SELECT token AS g2 FROM job_state.claim('gone', 'w') \gset
SELECT cancel_requested FROM job_state.heartbeat(:'g1');
BEGIN;
SET LOCAL job_state.restore = on;
DELETE FROM job_state.queue WHERE name = 'gone';
COMMIT;
\set VERBOSITY default
SELECT job_state.fail(:'g1', 'transient');
\set VERBOSITY sqlstate
SELECT job_state.fail(:'g2', 'permanent');
SELECT status, reason FROM job_state.job WHERE queue = 'gone' ORDER BY id;

-- a BEFORE UPDATE trigger that skips a job's change (returns NULL): claim,
-- succeed, succeed_many, fail and heartbeat refuse (09000) instead of reporting a
-- change that was never written
SELECT job_state.create_queue('skipq');
SELECT count(*) FROM (SELECT job_state.submit('skipq', jsonb_build_object('n', i)) FROM generate_series(1, 2) i) s;
CREATE FUNCTION skip_change() RETURNS trigger LANGUAGE plpgsql AS
$$ BEGIN RETURN NULL; END $$;
CREATE TRIGGER skip_claim BEFORE UPDATE ON job_state.job
	FOR EACH ROW WHEN (NEW.queue = 'skipq' AND NEW.worker = 'skipper')
	EXECUTE FUNCTION skip_change();
\set VERBOSITY default
SELECT count(*) FROM job_state.claim('skipq', 'skipper');
\set VERBOSITY sqlstate
SELECT status, generation, attempts FROM job_state.job WHERE queue = 'skipq' ORDER BY id;
SELECT (array_agg(token ORDER BY job_id))[1] AS s1, (array_agg(token ORDER BY job_id))[2] AS s2
  FROM job_state.claim('skipq', 'w', max_jobs => 2) \gset
CREATE TRIGGER skip_done BEFORE UPDATE ON job_state.job
	FOR EACH ROW WHEN (NEW.queue = 'skipq' AND OLD.status = 'running')
	EXECUTE FUNCTION skip_change();
SELECT job_state.succeed(:'s1');
SELECT count(*) FROM job_state.succeed_many(ARRAY[:'s1', :'s2']::job_state.claim_token[]);
SELECT job_state.fail(:'s2', 'transient');
SELECT job_state.fail(:'s2', 'permanent');
-- heartbeat too: the job is still the token's running claim, so the token
-- is not called stale (and no stale refusal is counted)
SELECT stale_refusals AS stale0 FROM job_state.queue_stats WHERE queue = 'skipq' \gset
\set VERBOSITY default
SELECT * FROM job_state.heartbeat(:'s1');
\set VERBOSITY sqlstate
SELECT stale_refusals = :stale0 AS none_counted FROM job_state.queue_stats WHERE queue = 'skipq';
SELECT status, generation FROM job_state.job WHERE queue = 'skipq' ORDER BY id;
DROP TRIGGER skip_claim ON job_state.job;
DROP TRIGGER skip_done ON job_state.job;
DROP FUNCTION skip_change();
SELECT job_state.succeed(:'s1');
SELECT job_state.fail(:'s2', 'permanent');
SELECT status, count(*) FROM job_state.job WHERE queue = 'skipq' GROUP BY status ORDER BY status;
SELECT to_status, count(*) FROM job_state.job_event WHERE queue = 'skipq'
 GROUP BY to_status ORDER BY to_status;
-- the operator calls too: with a trigger that skips every change of the
-- queue's jobs, cancel, reconcile and redrive refuse (09000) where they
-- would have changed a job, and cancel of a finished job answers as usual
SELECT job_id AS u FROM job_state.submit('skipq', '{"n": 3}') \gset
SET job_state.restore = on;
UPDATE job_state.job SET status = 'unknown' WHERE id = :u;
RESET job_state.restore;
CREATE FUNCTION skip_change() RETURNS trigger LANGUAGE plpgsql AS
$$ BEGIN RETURN NULL; END $$;
CREATE TRIGGER skip_all BEFORE UPDATE ON job_state.job
	FOR EACH ROW WHEN (NEW.queue = 'skipq') EXECUTE FUNCTION skip_change();
SELECT job_state.reconcile(:u, 'failed');
SELECT job_state.cancel(:u);
SELECT job_state.redrive(job_id) FROM job_state.my_jobs WHERE queue = 'skipq' AND status = 'failed';
SELECT job_state.cancel(job_id) FROM job_state.my_jobs WHERE queue = 'skipq' AND status = 'succeeded';
DROP TRIGGER skip_all ON job_state.job;
DROP FUNCTION skip_change();
SELECT status, count(*) FROM job_state.job WHERE queue = 'skipq' GROUP BY status ORDER BY status;

-- a BEFORE UPDATE trigger that fires before job_state_fsm (names sort
-- first) and rewrites the row: the state machine judges the row as that
-- trigger left it, not as the update wrote it.  Rewinding attempts on a
-- completion, or changing the input on a claim, is refused; a worker name
-- rewritten on the claim is the one the history holds.
SELECT job_state.create_queue('rewq');
SELECT job_id AS rw1 FROM job_state.submit('rewq', '{"n": 1}') \gset
SELECT job_id AS rw2 FROM job_state.submit('rewq', '{"n": 2}') \gset
CREATE FUNCTION rewrite_change() RETURNS trigger LANGUAGE plpgsql AS
$$ BEGIN
	IF TG_ARGV[0] = 'attempts' THEN NEW.attempts := 0;
	ELSIF TG_ARGV[0] = 'input' THEN NEW.input := '{"n": 0}';
	ELSE NEW.worker := 'rewritten';
	END IF;
	RETURN NEW;
END $$;
CREATE TRIGGER a_rewrite_worker BEFORE UPDATE ON job_state.job
	FOR EACH ROW WHEN (NEW.queue = 'rewq' AND OLD.status = 'accepted' AND NEW.status = 'running')
	EXECUTE FUNCTION rewrite_change('worker');
SELECT token AS rt1 FROM job_state.claim('rewq', 'w') \gset
SELECT worker, attempts FROM job_state.job WHERE id = :rw1;
SELECT from_status, to_status, detail->>'worker' AS worker FROM job_state.job_event WHERE job_id = :rw1 ORDER BY seq;
DROP TRIGGER a_rewrite_worker ON job_state.job;
CREATE TRIGGER a_rewrite_attempts BEFORE UPDATE ON job_state.job
	FOR EACH ROW WHEN (NEW.queue = 'rewq' AND OLD.status = 'running')
	EXECUTE FUNCTION rewrite_change('attempts');
\set VERBOSITY default
SELECT job_state.succeed(:'rt1');
\set VERBOSITY sqlstate
DROP TRIGGER a_rewrite_attempts ON job_state.job;
CREATE TRIGGER a_rewrite_input BEFORE UPDATE ON job_state.job
	FOR EACH ROW WHEN (NEW.queue = 'rewq' AND OLD.status = 'accepted')
	EXECUTE FUNCTION rewrite_change('input');
\set VERBOSITY default
SELECT count(*) FROM job_state.claim('rewq', 'w');
\set VERBOSITY sqlstate
DROP TRIGGER a_rewrite_input ON job_state.job;
DROP FUNCTION rewrite_change();
SELECT job_state.succeed(:'rt1');
SELECT id, status, attempts, input FROM job_state.job WHERE queue = 'rewq' ORDER BY id;
SELECT from_status, to_status, detail->>'worker' AS worker FROM job_state.job_event WHERE job_id = :rw1 ORDER BY seq;
