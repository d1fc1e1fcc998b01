-- bounds: every span added to a timestamp is finite and at most 10 years,
-- every amount finite; one queue's options never break another's expiry
\getenv abs_srcdir PG_ABS_SRCDIR
\i :abs_srcdir/sql/include/fresh_extension.sql
\set VERBOSITY default

-- options past the bound are refused with the value and the rule
SELECT job_state.create_queue('far', retry_interval => '11 years');
SELECT job_state.create_queue('far', max_delay => '3601 days');
SELECT job_state.create_queue('far', lease => '10 years 1 second');
SELECT job_state.create_queue('far', max_lease => '121 months');
\set VERBOSITY sqlstate
SELECT job_state.create_queue('far', max_delay => '3601 days');
-- exactly 10 years is allowed
SELECT job_state.create_queue('far', retry_interval => '10 years', max_delay => '3600 days');
SELECT job_state.alter_queue('far', max_delay => '10 years 1 day');

-- the same bound for the spans of claim, heartbeat, fail and purge
SELECT job_state.create_queue('near', lease => '1 min', retry_interval => '0', jitter => 'none');
SELECT job_id AS j1 FROM job_state.submit('near', '{"n": 1}') \gset
SELECT * FROM job_state.claim('near', 'w', lease => '11 years');
SELECT token AS t1 FROM job_state.claim('near', 'w') \gset
SELECT * FROM job_state.heartbeat(:'t1', extend => '11 years');
SELECT job_state.fail(:'t1', 'transient', NULL, '11 years');
SELECT job_state.fail(:'t1', 'transient', NULL, '-1 s');
SELECT job_state.purge('11 years');
SELECT job_state.purge('-1 day');
\set VERBOSITY default

-- retry_delay never exceeds the bound, whatever the policy
SELECT job_state.retry_delay('1000000 years', 1000, '1000000 years', 'none', 50) AS capped;
SELECT job_state.retry_delay('1 s', 'Infinity', '1000000 years', 'none', 3) AS capped;
SELECT job_state.retry_delay('1 s', 'NaN', '5 s', 'none', 3) AS capped_nan;
SELECT job_state.retry_delay('1000000 years', 1000, '1000000 years', 'full', 50)
	<= interval '3600 days' AS jitter_within;

-- Defect: a queue whose policy (set by raw SQL past what create_queue
-- checks) made retry_delay overflow stopped lease expiry for every queue.
-- Raw SQL is held to create_queue's spans; within them the policy's
-- growth is still capped where it is used.
SELECT job_state.create_queue('huge', lease => '1 min', on_lease_expiry => 'retry');
\set VERBOSITY terse
UPDATE job_state.queue SET retry_interval = '1000000 years' WHERE name = 'huge';
UPDATE job_state.queue SET lease = '3601 days' WHERE name = 'huge';
\set VERBOSITY default
UPDATE job_state.queue
   SET retry_interval = '3600 days', max_delay = '3600 days', backoff_rate = 1000,
       jitter = 'none'
 WHERE name = 'huge';
SELECT job_id AS jh FROM job_state.submit('huge', '{"n": 2}') \gset
SELECT token AS th FROM job_state.claim('huge', 'w') \gset
-- both leases run out
UPDATE job_state.job SET lease_expires_at = now() - interval '1 s'
 WHERE id IN (:j1, :jh);
SELECT job_state.sweep() AS moved;
SELECT queue, status, reason, retries,
       queue <> 'huge' OR run_after - now() BETWEEN interval '3599 days' AND interval '3601 days'
         AS run_after_capped
  FROM job_state.job WHERE id IN (:j1, :jh) ORDER BY id;

-- Defect: charge(token, meter, 'Infinity') was stored as a JSON string that
-- the budget checks skipped, so the job was started again past its limit.
SELECT job_state.create_queue('metered', retry_interval => '0', jitter => 'none', max_retries => 10);
SELECT job_id AS jm FROM job_state.submit('metered', '{"n": 3}', budget => '{"usd": 5}') \gset
SELECT token AS tm FROM job_state.claim('metered', 'w') \gset
SELECT job_state.charge(:'tm', 'usd', 'Infinity');
SELECT job_state.charge(:'tm', 'usd', '-Infinity');
SELECT job_state.charge(:'tm', 'usd', 'NaN');
SELECT job_state.reserve(:'tm', 'usd', 'Infinity');
SELECT job_state.charge(:'tm', 'usd', 1) AS left_over;
-- raw SQL cannot store an amount that is not a number
UPDATE job_state.job SET spent = '{"usd": "Infinity"}' WHERE id = :jm;
UPDATE job_state.job SET spent = '{"usd": 2, "other": "x"}' WHERE id = :jm;
UPDATE job_state.job SET spent = '{"usd": -1}' WHERE id = :jm;
UPDATE job_state.job SET spent = '"x"' WHERE id = :jm;
SELECT spent FROM job_state.job WHERE id = :jm;
-- a spend that cannot be read counts as used up
SELECT job_state.budget_exhausted('{"usd": 5}', '{"usd": "Infinity"}') AS unreadable_is_used_up,
       job_state.budget_exhausted('{"usd": 5}', '{"usd": 4}') AS under,
       job_state.budget_exhausted('{"usd": 5}', '{}') AS nothing_spent;

-- succeed_many takes at most 10000 tokens, as claim returns at most 10000 jobs
SELECT * FROM job_state.succeed_many(pg_catalog.array_fill(:'tm'::job_state.claim_token, ARRAY[10001]));
SELECT * FROM job_state.claim('metered', 'w', max_jobs => 10001);

-- int4 counters at the largest int4 are refused with 22003 and the job's
-- id, never wrapped (a wrapped counter went back, or made every token of
-- the job look stale, after undefined behaviour in C).  Only raw SQL gets
-- a counter this far.
\set VERBOSITY default
\set SHOW_CONTEXT never
SELECT job_state.create_queue('ctr', retry_interval => '0', jitter => 'none',
                              max_retries => 2147483647);
SELECT job_id AS jc FROM job_state.submit('ctr', '{"n": 1}') \gset
SELECT token AS tc FROM job_state.claim('ctr', 'w') \gset
-- throttles: a throttled retry counts one more
UPDATE job_state.job SET throttles = 2147483647 WHERE id = :jc;
SELECT job_state.fail(:'tc', 'throttled');
SELECT status, throttles, retries FROM job_state.job WHERE id = :jc;
-- retries: at the largest the retry policy is used up (the delay of the
-- next retry is not computed past it)
UPDATE job_state.job SET retries = 2147483647 WHERE id = :jc;
SELECT job_state.fail(:'tc', 'transient');
SELECT status, reason, retries FROM job_state.job WHERE id = :jc;
-- generation: a redrive makes one more
UPDATE job_state.job SET generation = 2147483647 WHERE id = :jc;
SELECT job_state.redrive(:jc);
SELECT status, generation FROM job_state.job WHERE id = :jc;
-- max_attempts: a redrive adds extra_attempts
UPDATE job_state.job SET max_attempts = 2147483000 WHERE id = :jc;
SELECT job_state.redrive(:jc, extra_attempts => 1000);
SELECT job_state.redrive(:jc, extra_attempts => 647);
SELECT status, max_attempts FROM job_state.job WHERE id = :jc;
-- generation and attempts: a claim makes one more of each.  A job that has
-- none left is failed as attempts_exhausted (it would otherwise make every
-- claim of its queue fail), and the job behind it is claimed.
SELECT job_state.create_queue('ctr2');
SELECT job_id AS jg FROM job_state.submit('ctr2', '{"n": 2}') \gset
SELECT job_id AS ja FROM job_state.submit('ctr2', '{"n": 3}') \gset
SELECT job_id AS jok FROM job_state.submit('ctr2', '{"n": 4}') \gset
UPDATE job_state.job SET generation = 2147483647 WHERE id = :jg;
UPDATE job_state.job SET attempts = 2147483647 WHERE id = :ja;
SELECT job_id = :jok AS claimed_the_next FROM job_state.claim('ctr2', 'w', max_jobs => 3);
SELECT id, status, reason, generation, attempts FROM job_state.job
 WHERE id IN (:jg, :ja, :jok) ORDER BY id;
-- raw SQL that starts such a job is refused by the job trigger
SELECT job_id AS jraw FROM job_state.submit('ctr2', '{"n": 5}') \gset
UPDATE job_state.job SET attempts = 2147483647 WHERE id = :jraw;
UPDATE job_state.job SET status = 'running', lease_expires_at = now() + interval '1 min'
 WHERE id = :jraw;
SELECT status, generation, attempts FROM job_state.job WHERE id = :jraw;
\set SHOW_CONTEXT errors
