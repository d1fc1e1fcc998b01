-- idempotent submit
\getenv abs_srcdir PG_ABS_SRCDIR
\i :abs_srcdir/sql/include/fresh_extension.sql
\set VERBOSITY sqlstate
SELECT job_state.create_queue('sub');
SELECT job_state.create_queue('sub2', max_attempts => 3);

-- same key, same input: the same job, created = false, whatever its state
SELECT * FROM job_state.submit('sub', '{"a": 1, "b": [1, 2]}', 'key-1');
SELECT * FROM job_state.submit('sub', '{"b": [1, 2], "a": 1}', 'key-1');
-- same key in another queue is another job
SELECT * FROM job_state.submit('sub2', '{"a": 1, "b": [1, 2]}', 'key-1');
-- same key, different input: JS002 (with the existing job in errdetail)
SELECT * FROM job_state.submit('sub', '{"a": 2}', 'key-1');
\set VERBOSITY default
SELECT * FROM job_state.submit('sub', '{"a": 2}', 'key-1');
\set VERBOSITY sqlstate
-- after a claim the key still returns the job, in its current state
SELECT job_id FROM job_state.claim('sub', 'w');
SELECT * FROM job_state.submit('sub', '{"a": 1, "b": [1, 2]}', 'key-1');
-- no key: always a new job
SELECT job_id, created FROM job_state.submit('sub', '{"x": 1}');
SELECT job_id, created FROM job_state.submit('sub', '{"x": 1}');

-- the input hash is SHA-256 of the canonical jsonb text
SELECT input_hash = sha256(convert_to(input::text, 'UTF8')) AS hash_is_sha256
  FROM job_state.job WHERE idempotency_key = 'key-1' AND queue = 'sub';

-- defaults and options stored
SELECT job_state.create_resource('model-a', 2);
SELECT job_id AS j FROM job_state.submit('sub2', '{"y": 1}', priority => 5,
    deadline => '2999-01-01 00:00+00', budget => '{"usd_cents": 500, "tokens": 2e5}',
    resource => 'model-a', concurrency_key => 'user-42') \gset
SELECT priority, max_attempts, deadline, budget, spent, resource, concurrency_key,
       status, generation, attempts, run_after <= now() AS ready
  FROM job_state.job WHERE id = :j;
SELECT job_id AS j FROM job_state.submit('sub2', '{"y": 2}', max_attempts => 7) \gset
SELECT max_attempts FROM job_state.job WHERE id = :j;

-- errors
SELECT * FROM job_state.submit('nope', '{}');
SELECT * FROM job_state.submit('nope', '{}', 'k');
SELECT * FROM job_state.submit(NULL, '{}');
SELECT * FROM job_state.submit('sub', NULL);
SELECT * FROM job_state.submit('sub', '{}', '');
SELECT * FROM job_state.submit('sub', '{}', repeat('k', 256));
SELECT job_id FROM job_state.submit('sub', '{}', repeat('k', 255));
SELECT * FROM job_state.submit('sub', '{}', max_attempts => 0);
SELECT * FROM job_state.submit('sub', '{}', budget => '[1, 2]');
SELECT * FROM job_state.submit('sub', '{}', budget => '5');
SELECT * FROM job_state.submit('sub', '{}', budget => '{"usd": -1}');
SELECT * FROM job_state.submit('sub', '{}', budget => '{"usd": "ten"}');
SELECT * FROM job_state.submit('sub', '{}', budget => '{"": 1}');
SELECT * FROM job_state.submit('sub', '{}', concurrency_key => '');
SELECT * FROM job_state.submit('sub', '{}', resource => '');
SELECT * FROM job_state.submit('sub', '{}', resource => 'no-such-model');
-- nothing was written by the refused calls
SELECT count(*) AS jobs FROM job_state.job;

-- a submit writes no history row: the job row records it (accepted_at,
-- submitted_by), and only a keyed job has an input hash (what a key given
-- again is checked against)
SELECT count(*) FILTER (WHERE from_status IS NULL) AS submit_events, count(*) AS events
  FROM job_state.job_event;
SELECT idempotency_key IS NOT NULL AS keyed, input_hash IS NOT NULL AS hashed, count(*)
  FROM job_state.job GROUP BY 1, 2 ORDER BY 1, 2;

-- the submit is part of the caller's transaction
BEGIN;
SELECT job_id, created FROM job_state.submit('sub', '{"tx": 1}', 'tx-key');
ROLLBACK;
SELECT count(*) AS after_rollback FROM job_state.job WHERE idempotency_key = 'tx-key';


-- a future run_after is not claimable; priority desc then run_after, id asc
SELECT job_state.create_queue('ord');
SELECT job_id FROM job_state.submit('ord', '{"n": "late"}', run_after => now() + interval '1 hour');
SELECT job_id FROM job_state.submit('ord', '{"n": "low"}', priority => -1);
SELECT job_id FROM job_state.submit('ord', '{"n": "first"}');
SELECT job_id FROM job_state.submit('ord', '{"n": "high"}', priority => 10);
SELECT job_id FROM job_state.submit('ord', '{"n": "second"}');
SELECT input->>'n' AS n, attempt FROM job_state.claim('ord', 'w', max_jobs => 10);

-- submit writes: refused in a read-only transaction (as on a standby)
BEGIN READ ONLY;
SELECT job_id FROM job_state.submit('sub', '{"ro": true}');
ROLLBACK;
SELECT count(*) AS read_only_jobs FROM job_state.job WHERE input ? 'ro';

-- the columns submit does not set take the table's defaults, read again
-- after the table changes
BEGIN;
SELECT job_id AS d1 FROM job_state.submit('sub', '{"d": 1}') \gset
SELECT spent, status, generation, attempts, retries, throttles, cancel_requested,
       queue_slot, resource_slot, key_slot, accepted_at = now() AS accepted_now, run_after = now() AS runs_now,
       submitted_by::text = current_user AS by_me
  FROM job_state.job WHERE id = :d1;
COMMIT;
ALTER TABLE job_state.job ALTER COLUMN spent SET DEFAULT '{"seeded": 0}';
SELECT job_id AS d2 FROM job_state.submit('sub', '{"d": 2}') \gset
ALTER TABLE job_state.job ALTER COLUMN spent SET DEFAULT '{}';
SELECT job_id AS d3 FROM job_state.submit('sub', '{"d": 3}') \gset
SELECT id = :d2 AS second, spent FROM job_state.job WHERE id IN (:d2, :d3) ORDER BY id;

-- submit sees what its own transaction wrote before it, even in the same
-- statement: a queue created just before
BEGIN;
SELECT job_state.create_queue('inline_sub') IS NOT NULL AS created,
       (SELECT created FROM job_state.submit('inline_sub', '{}')) AS submitted;
ROLLBACK;

-- a BEFORE INSERT trigger that skips the job: submit refuses (09000)
-- instead of answering with a job that was never stored
CREATE FUNCTION skip_job() RETURNS trigger LANGUAGE plpgsql AS
$$ BEGIN RETURN NULL; END $$;
CREATE TRIGGER skip_job BEFORE INSERT ON job_state.job
	FOR EACH ROW WHEN (NEW.input ? 'skip') EXECUTE FUNCTION skip_job();
\set VERBOSITY default
SELECT job_id FROM job_state.submit('sub', '{"skip": 1}');
\set VERBOSITY sqlstate
SELECT job_id FROM job_state.submit('sub', '{"skip": 2}', idempotency_key => 'skip-2');
SELECT created FROM job_state.submit('sub', '{"kept": 1}', idempotency_key => 'kept-1');
DROP TRIGGER skip_job ON job_state.job;
DROP FUNCTION skip_job();
SELECT count(*) FILTER (WHERE input ? 'skip') AS skipped_stored,
       count(*) FILTER (WHERE input ? 'kept') AS kept_stored
  FROM job_state.job WHERE queue = 'sub';

-- a stored generated column an operator adds to the job table is computed
-- from the new row (not evaluated as a column default)
BEGIN;
ALTER TABLE job_state.job ADD COLUMN input_kind text
	GENERATED ALWAYS AS (input ->> 'kind') STORED;
SELECT created FROM job_state.submit('sub', '{"kind": "generated"}');
SELECT input_kind FROM job_state.job WHERE input_kind IS NOT NULL;
ROLLBACK;
