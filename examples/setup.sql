-- examples/setup.sql: the database side of the 202 round trip (examples/run
-- plays it as a superuser into a fresh database).
--
-- One queue, "demo", with a short lease so that a worker that dies is
-- noticed in seconds, and the default on_lease_expiry = 'unknown': a dead
-- worker's job is not simply run again, an operator looks first (run's
-- operator step).  Retries are quick so that the demo is short.
--
-- Roles, least privilege (README "Least-privilege roles" and "One queue
-- per tenant"), all LOGIN without a password (the throwaway cluster trusts
-- its Unix socket):
--   js_example_front     the API's front: submit, wait, read its queue
--   js_example_callback  the API's callback endpoint: succeed/fail/heartbeat
--                        with a token it was handed, on "demo" only
--   js_example_worker    the workers: claim and act through tokens
--   js_example_operator  sweep, reconcile, read the dead letters
--   js_example_external  the simulated external systems (the flaky model and
--                        the asynchronous runtime): owns schema example,
--                        nothing in job_state
-- Roles are cluster-wide: they are created when missing and left behind
-- (the throwaway cluster goes with them).

DO $$
DECLARE
	r text;
BEGIN
	FOREACH r IN ARRAY ARRAY['js_example_front', 'js_example_callback',
							 'js_example_worker', 'js_example_operator',
							 'js_example_external']
	LOOP
		IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = r) THEN
			EXECUTE pg_catalog.format('CREATE ROLE %I LOGIN', r);
		END IF;
	END LOOP;
END
$$;

CREATE EXTENSION job_state;

SELECT job_state.create_queue('demo',
	lease => '2 s',				-- a silent worker is noticed after 2 s
	max_retries => 8,
	retry_interval => '0.1 s',
	max_delay => '0.5 s');

-- per-queue privileges: the first grant makes the queue's privileges explicit
SELECT job_state.grant_queue('demo', 'js_example_front', 'submit', 'read');
SELECT job_state.grant_queue('demo', 'js_example_callback', 'callback');
SELECT job_state.grant_queue('demo', 'js_example_worker', 'claim');
SELECT job_state.grant_queue('demo', 'js_example_operator', 'operate', 'read');

GRANT USAGE ON SCHEMA job_state TO js_example_front, js_example_callback,
	js_example_worker, js_example_operator;

GRANT EXECUTE ON FUNCTION job_state.submit(text, jsonb, text, timestamptz, int,
	int, timestamptz, jsonb, text, text) TO js_example_front;
GRANT SELECT ON job_state.queue_jobs TO js_example_front, js_example_operator;
GRANT EXECUTE ON PROCEDURE job_state.wait(bigint, interval, job_state.status,
	jsonb, jsonb, text, timestamptz) TO js_example_front;

GRANT EXECUTE ON FUNCTION
	job_state.succeed(job_state.claim_token, jsonb),
	job_state.fail(job_state.claim_token, job_state.error_class, jsonb, interval),
	job_state.heartbeat(job_state.claim_token, interval, jsonb)
	TO js_example_callback;

GRANT EXECUTE ON FUNCTION
	job_state.claim(text, text, interval, int),
	job_state.heartbeat(job_state.claim_token, interval, jsonb),
	job_state.succeed(job_state.claim_token, jsonb),
	job_state.fail(job_state.claim_token, job_state.error_class, jsonb, interval),
	job_state.begin_operation(job_state.claim_token, text),
	job_state.finish_operation(job_state.claim_token, text, jsonb),
	job_state.wait_for_callback(job_state.claim_token, interval, interval, boolean),
	job_state.add_ref(job_state.claim_token, text, text)
	TO js_example_worker;

GRANT EXECUTE ON FUNCTION
	job_state.sweep(),
	job_state.reconcile(bigint, job_state.status, jsonb)
	TO js_example_operator;
GRANT SELECT ON job_state.dead_letters TO js_example_operator;

-- The external systems' own records.  Nothing here is job_state's: it is
-- what a model provider or a batch runtime would know.
CREATE SCHEMA example AUTHORIZATION js_example_external;
SET ROLE js_example_external;

-- the side effect: one row per operation id, written by the model when it
-- did the work; the primary key would catch a second execution
CREATE TABLE example.effect (
	op_id text PRIMARY KEY,
	job_id bigint NOT NULL,
	result jsonb NOT NULL,
	at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp()
);
-- a second execution of an operation, caught by that primary key
CREATE TABLE example.duplicate_effect (
	op_id text NOT NULL,
	at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp()
);
-- every call of the model and what it did (the seed decides)
CREATE TABLE example.model_call (
	job_id bigint NOT NULL,
	attempt int NOT NULL,
	fate text NOT NULL
);
-- what a worker learned from begin_operation
CREATE TABLE example.operation_note (
	job_id bigint NOT NULL,
	attempt int NOT NULL,
	note text NOT NULL
);
-- the asynchronous runtime's record of each task it was handed
CREATE TABLE example.runtime_task (
	job_id bigint NOT NULL,
	generation int NOT NULL,
	mode text NOT NULL,
	state text NOT NULL,		-- running, called_back, done_silently, lost
	result jsonb,
	PRIMARY KEY (job_id, generation)
);
-- every callback the runtime sent and the HTTP status it got
CREATE TABLE example.callback_sent (
	job_id bigint NOT NULL,
	generation int NOT NULL,
	mode text NOT NULL,
	http_status int NOT NULL
);
GRANT USAGE ON SCHEMA example TO js_example_operator;
GRANT SELECT ON example.runtime_task TO js_example_operator;
RESET ROLE;
