-- attempts, deadlines and cost budgets that survive retries and redrives
\getenv abs_srcdir PG_ABS_SRCDIR
\i :abs_srcdir/sql/include/fresh_extension.sql
\set VERBOSITY sqlstate
SELECT job_state.create_queue('llm', retry_interval => '0', jitter => 'none', max_retries => 100);

-- The amplification scenario: SQS delivers 5 times, the orchestrator retries
-- 4 times, the SDK 3 times: 60 tries to run one job.  max_attempts = 5 caps
-- the runs at 5, whatever the layers above do.
SELECT job_id AS amp FROM job_state.submit('llm', '{"prompt": "summarise"}', 'req-1', max_attempts => 5) \gset
CREATE TABLE tries (sqs int, orch int, sdk int, ran boolean);
DO $$
DECLARE
	t job_state.claim_token;
	j bigint;
BEGIN
	FOR sqs IN 1..5 LOOP
		FOR orch IN 1..4 LOOP
			FOR sdk IN 1..3 LOOP
				-- every layer resubmits with the same key, then tries to run it
				SELECT job_id INTO j FROM job_state.submit('llm', '{"prompt": "summarise"}', 'req-1');
				UPDATE job_state.job SET run_after = now() WHERE id = j AND status = 'accepted';
				t := NULL;
				SELECT token INTO t FROM job_state.claim('llm', 'w');
				IF t IS NOT NULL THEN
					PERFORM job_state.fail(t, 'transient', '{"msg": "model timeout"}');
				END IF;
				INSERT INTO tries VALUES (sqs, orch, sdk, t IS NOT NULL);
			END LOOP;
		END LOOP;
	END LOOP;
END $$;
SELECT count(*) AS tries, count(*) FILTER (WHERE ran) AS runs FROM tries;
SELECT status, reason, attempts, generation FROM job_state.job WHERE id = :amp;
SELECT count(*) AS starts FROM job_state.job_event WHERE job_id = :amp AND to_status = 'running';

-- an operator redrive cannot reset it: without extra attempts it is refused
SELECT job_state.redrive(:amp);
\set VERBOSITY default
SELECT job_state.redrive(:amp);
\set VERBOSITY sqlstate
SELECT status, attempts FROM job_state.job WHERE id = :amp;
-- with one extra attempt the job runs exactly once more
SELECT job_state.redrive(:amp, extra_attempts => 1);
SELECT status, max_attempts, retries, generation FROM job_state.job WHERE id = :amp;
SELECT token AS t FROM job_state.claim('llm', 'w') \gset
SELECT job_state.fail(:'t', 'transient');
SELECT status, reason, attempts FROM job_state.job WHERE id = :amp;

-- the deadline: claim fails a job past it, fail does not retry past it
SELECT job_id AS dl FROM job_state.submit('llm', '{"d": 1}', deadline => clock_timestamp() + interval '1 hour') \gset
SELECT token AS t FROM job_state.claim('llm', 'w') \gset
SELECT job_state.fail(:'t', 'transient', retry_after => '2 hours');
SELECT status, reason FROM job_state.job WHERE id = :dl;
SELECT job_id AS dl2 FROM job_state.submit('llm', '{"d": 2}', deadline => clock_timestamp() + interval '50 ms') \gset
SELECT pg_sleep(0.1);
SELECT count(*) AS claimed FROM job_state.claim('llm', 'w');
SELECT status, reason FROM job_state.job WHERE id = :dl2;
SELECT job_state.redrive(:dl2);
SELECT job_state.redrive(:dl2, new_deadline => clock_timestamp() + interval '1 hour');
SELECT status FROM job_state.job WHERE id = :dl2;
SELECT count(*) AS claimed FROM job_state.claim('llm', 'w');

-- cost meters: charge records spend (never refused), reserve checks plans
SELECT job_id AS b FROM job_state.submit('llm', '{"b": 1}', budget => '{"usd_cents": 500, "tokens": 1000}') \gset
SELECT token AS t FROM job_state.claim('llm', 'w') \gset
SELECT job_state.reserve(:'t', 'usd_cents', 200) AS left_if_spent;
SELECT job_state.charge(:'t', 'usd_cents', 200) AS usd_left;
SELECT job_state.charge(:'t', 'tokens', 400) AS tokens_left;
SELECT job_state.reserve(:'t', 'usd_cents', 301);
\set VERBOSITY default
SELECT job_state.reserve(:'t', 'usd_cents', 301);
\set VERBOSITY sqlstate
SELECT job_state.reserve(:'t', 'usd_cents', 300) AS exactly_the_rest;
SELECT job_state.reserve(:'t', 'nope', 1);
SELECT job_state.charge(:'t', 'nope', 1);
SELECT job_state.charge(:'t', 'usd_cents', -1);
SELECT job_state.charge(:'t', 'usd_cents', 'NaN');
SELECT job_state.reserve(:'t', 'usd_cents', -1);
SELECT job_state.charge(:'t', NULL, 1);
SELECT job_state.charge(NULL, 'usd_cents', 1);
SELECT job_state.reserve(:'t', 'usd_cents', NULL);
SELECT job_state.reserve(:'t', 'usd_cents', 'NaN');
-- spend may overshoot: it happened
SELECT job_state.charge(:'t', 'usd_cents', 350) AS usd_left;
SELECT spent FROM job_state.job WHERE id = :b;
-- the job is used up: a retry ends it as budget_exhausted
SELECT job_state.fail(:'t', 'transient');
SELECT status, reason FROM job_state.job WHERE id = :b;
-- a stale token may still charge (late spend is a fact), with its generation
SELECT job_state.charge(:'t', 'tokens', 10) AS tokens_left;
SELECT generation, meter, amount FROM job_state.spend WHERE job_id = :b ORDER BY at;
-- redrive without extra budget is refused; extra_budget raises only the given meter
SELECT job_state.redrive(:b);
SELECT job_state.redrive(:b, extra_budget => '{"usd_cents": 40}');
SELECT job_state.redrive(:b, extra_budget => '{"nope": 40}');
SELECT job_state.redrive(:b, extra_budget => '{"usd_cents": -1}');
SELECT job_state.redrive(:b, extra_budget => '{"usd_cents": 100}');
SELECT status, budget, spent, generation FROM job_state.job WHERE id = :b;
-- the old token died with the redrive (reserve needs the current claim)
SELECT job_state.reserve(:'t', 'usd_cents', 1);
SELECT token AS t2 FROM job_state.claim('llm', 'w') \gset
SELECT job_state.reserve(:'t2', 'usd_cents', 50) AS left_if_spent;
SELECT job_state.succeed(:'t2');
-- a succeeded job still records late spend
SELECT job_state.charge(:'t2', 'usd_cents', 5) AS usd_left;
SELECT status, spent FROM job_state.job WHERE id = :b;

-- a zero budget: the job may never start
SELECT job_id AS z FROM job_state.submit('llm', '{"z": 1}', budget => '{"usd": 0}') \gset
SELECT count(*) AS claimed FROM job_state.claim('llm', 'w');
SELECT status, reason FROM job_state.job WHERE id = :z;
SELECT job_state.budget_exhausted('{"a": 1}', '{"a": 0.5}') AS half,
       job_state.budget_exhausted('{"a": 1}', '{"a": 1}') AS full,
       job_state.budget_exhausted('{"a": 1}', NULL) AS no_spend,
       job_state.budget_exhausted(NULL, '{"a": 1}') AS no_budget;
