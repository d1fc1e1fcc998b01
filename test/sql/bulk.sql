-- bulk calls: submit_many and redrive_many
\getenv abs_srcdir PG_ABS_SRCDIR
\i :abs_srcdir/sql/include/fresh_extension.sql
\set VERBOSITY sqlstate
SELECT job_state.create_queue('bulk', max_retries => 0);
SELECT job_state.create_queue('bulk2');

-- created, existing, conflict: per row, in input order; the second row of
-- a key within one call finds the first row's job
SELECT * FROM job_state.submit_many('bulk',
    ARRAY['{"n": 1}', '{"n": 2}', '{"n": 3}', '{"n": 2}', '{"n": 9}']::jsonb[],
    ARRAY['k3', 'k1', NULL, 'k1', 'k1']);
-- again: existing for the same inputs (whatever the order), conflict for another
SELECT * FROM job_state.submit_many('bulk',
    ARRAY['{"n": 2}', '{"n": 1}', '{"other": true}', '{"n": 4}']::jsonb[],
    ARRAY['k1', 'k3', 'k3', 'k4']);
-- a conflict row stores nothing: one job per key, with its first input
SELECT idempotency_key, input, count(*) OVER (PARTITION BY idempotency_key) AS jobs
  FROM job_state.job WHERE queue = 'bulk' ORDER BY id;
-- ids follow input order (the keyed rows are inserted in key order)
SELECT job_id, outcome FROM job_state.submit_many('bulk',
    ARRAY['{}', '{}', '{}']::jsonb[], ARRAY['z', 'a', NULL]) ORDER BY ord;
SELECT idempotency_key FROM job_state.job
 WHERE queue = 'bulk' AND input = '{}' ORDER BY id;
-- submit and submit_many share the keys, in both directions
SELECT job_id, created FROM job_state.submit('bulk', '{"n": 4}', 'k4');
SELECT * FROM job_state.submit('bulk', '{"n": 5}', 'k4');
SELECT job_id, created FROM job_state.submit('bulk', '{"n": 6}', 'k6');
SELECT ord, outcome FROM job_state.submit_many('bulk', ARRAY['{"n": 6}']::jsonb[], ARRAY['k6']);
-- the existing job is returned whatever its state
SELECT job_state.fail(token, 'permanent') FROM job_state.claim('bulk', 'w', max_jobs => 10);
SELECT ord, outcome, status FROM job_state.submit_many('bulk', ARRAY['{"n": 1}']::jsonb[], ARRAY['k3']);

-- every option, per row; NULL elements take submit's defaults
SELECT job_state.create_resource('bulk-model', 2);
SELECT job_state.create_queue('bulk3', max_attempts => 4);
SELECT ord, outcome, status FROM job_state.submit_many('bulk3',
    ARRAY['{"a": 1}', '{"a": 2}']::jsonb[],
    idempotency_keys => ARRAY['o1', NULL],
    run_afters => ARRAY['2999-01-01 00:00+00', NULL]::timestamptz[],
    priorities => ARRAY[7, NULL],
    max_attempts => ARRAY[NULL, 2],
    deadlines => ARRAY[NULL, '2998-01-01 00:00+00']::timestamptz[],
    budgets => ARRAY['{"usd": 5}', NULL]::jsonb[],
    resources => ARRAY['bulk-model', NULL],
    concurrency_keys => ARRAY[NULL, 'user-1']);
SELECT input, idempotency_key, run_after > now() AS later, priority, max_attempts,
       deadline, budget, resource, concurrency_key, submitted_by = current_user::regrole AS mine
  FROM job_state.job WHERE queue = 'bulk3' ORDER BY id;
-- as for submit, the job row records the submit (who, when, and the input
-- hash of a keyed job only); job_event gets no row for it
SELECT j.accepted_at <= now() AS accepted, j.idempotency_key,
       j.input_hash = sha256(convert_to(j.input::text, 'UTF8')) AS hashed,
       (SELECT count(*) FROM job_state.job_event e
         WHERE e.queue = j.queue AND e.job_id = j.id) AS events
  FROM job_state.job j WHERE j.queue = 'bulk3' ORDER BY j.id;
-- an empty batch returns nothing
SELECT * FROM job_state.submit_many('bulk', '{}'::jsonb[]);
-- the most rows a call takes
SELECT count(*), count(DISTINCT job_id) FROM job_state.submit_many('bulk2',
    array_fill('{}'::jsonb, ARRAY[10000]));

-- errors
-- an array of another length than inputs: 22023, naming both
SELECT * FROM job_state.submit_many('bulk', ARRAY['{}', '{}']::jsonb[], ARRAY['x']);
SELECT * FROM job_state.submit_many('bulk', ARRAY['{}']::jsonb[], priorities => ARRAY[1, 2]);
SELECT * FROM job_state.submit_many('bulk', ARRAY['{}']::jsonb[], concurrency_keys => '{}');
\set VERBOSITY default
SELECT * FROM job_state.submit_many('bulk', ARRAY['{}', '{}']::jsonb[], ARRAY['x']);
\set VERBOSITY sqlstate
-- more than one dimension
SELECT * FROM job_state.submit_many('bulk', ARRAY[['{}'], ['{}']]::jsonb[]);
SELECT * FROM job_state.submit_many('bulk', ARRAY['{}']::jsonb[], ARRAY[['x']]);
-- a NULL input: 22004, naming its position
SELECT * FROM job_state.submit_many('bulk', ARRAY['{}', NULL]::jsonb[]);
\set VERBOSITY default
SELECT * FROM job_state.submit_many('bulk', ARRAY['{}', NULL]::jsonb[]);
\set VERBOSITY sqlstate
SELECT * FROM job_state.submit_many('bulk', NULL);
SELECT * FROM job_state.submit_many(NULL, ARRAY['{}']::jsonb[]);
-- too many rows
SELECT * FROM job_state.submit_many('bulk', array_fill('{}'::jsonb, ARRAY[10001]));
-- an unknown queue: JS008
SELECT * FROM job_state.submit_many('nope', ARRAY['{}']::jsonb[]);
SELECT * FROM job_state.submit_many('nope', '{}'::jsonb[]);
-- per-row argument checks, as submit's (the row in the context)
SELECT * FROM job_state.submit_many('bulk', ARRAY['{}', '{}']::jsonb[], ARRAY['ok', '']);
SELECT * FROM job_state.submit_many('bulk', ARRAY['{}', '{}']::jsonb[], ARRAY['ok', repeat('x', 256)]);
SELECT * FROM job_state.submit_many('bulk', ARRAY['{}', '{}']::jsonb[], max_attempts => ARRAY[1, 0]);
\set VERBOSITY default
SELECT * FROM job_state.submit_many('bulk', ARRAY['{}', '{}']::jsonb[], max_attempts => ARRAY[1, 0]);
\set VERBOSITY sqlstate
SELECT * FROM job_state.submit_many('bulk', ARRAY['{}']::jsonb[], budgets => ARRAY['[1]']::jsonb[]);
SELECT * FROM job_state.submit_many('bulk', ARRAY['{}']::jsonb[], budgets => ARRAY['{"m": -1}']::jsonb[]);
SELECT * FROM job_state.submit_many('bulk', ARRAY['{}']::jsonb[], resources => ARRAY['']);
SELECT * FROM job_state.submit_many('bulk', ARRAY['{}']::jsonb[], resources => ARRAY['no-such-resource']);
SELECT * FROM job_state.submit_many('bulk', ARRAY['{}']::jsonb[], concurrency_keys => ARRAY['']);
-- a failing row fails the whole call: nothing of it is stored
SELECT count(*) FROM job_state.job WHERE queue = 'bulk' AND idempotency_key = 'ok';

-- privileges: submit on the queue, checked before any key is looked at
CREATE ROLE regress_js_bulk;
CREATE ROLE regress_js_bulk_other;
GRANT USAGE ON SCHEMA job_state TO regress_js_bulk, regress_js_bulk_other;
GRANT EXECUTE ON FUNCTION job_state.submit_many(text, jsonb[], text[], timestamptz[],
    int[], int[], timestamptz[], jsonb[], text[], text[]),
    job_state.redrive_many(text, text, int, float8, int, jsonb, timestamptz)
    TO regress_js_bulk, regress_js_bulk_other;
SELECT job_state.grant_queue('bulk', 'regress_js_bulk', 'submit');
SELECT job_state.revoke_queue('bulk', 'public', 'all');
SET ROLE regress_js_bulk_other;
SELECT * FROM job_state.submit_many('bulk', ARRAY['{"n": 1}']::jsonb[], ARRAY['k3']);
SELECT * FROM job_state.submit_many('bulk', '{}'::jsonb[]);
\set VERBOSITY default
SELECT * FROM job_state.submit_many('bulk', ARRAY['{"n": 1}']::jsonb[], ARRAY['k3']);
\set VERBOSITY sqlstate
RESET ROLE;
SET ROLE regress_js_bulk;
SELECT ord, outcome FROM job_state.submit_many('bulk', ARRAY['{"n": 1}', '{"by": "bulk"}']::jsonb[], ARRAY['k3', NULL]);
RESET ROLE;
SELECT submitted_by FROM job_state.job WHERE queue = 'bulk' AND input = '{"by": "bulk"}';

-- read-only transactions are refused
BEGIN READ ONLY;
SELECT * FROM job_state.submit_many('bulk', ARRAY['{}']::jsonb[]);
ROLLBACK;

-- redrive_many
SELECT job_state.create_queue('dl', max_retries => 0);
SELECT count(*) FROM job_state.submit_many('dl', array_fill('{}'::jsonb, ARRAY[8]),
    max_attempts => ARRAY[1, 5, 5, 5, 5, 5, 5, 5],
    budgets => ARRAY[NULL, NULL, NULL, NULL, NULL, NULL, '{"usd": 1}', NULL]::jsonb[]);
SELECT min(id) AS first FROM job_state.job WHERE queue = 'dl' \gset
-- failed: 0 (its one attempt used), 1 and 2; unknown: 3 and 4; 5 cancelled;
-- 6 failed with its budget used up; 7 waiting
SELECT job_state.fail(token, 'permanent') FROM job_state.claim('dl', 'w', max_jobs => 3);
SELECT job_state.fail(token, 'unknown') FROM job_state.claim('dl', 'w', max_jobs => 2);
SELECT job_state.cancel(:first + 5);
SELECT job_state.charge(token, 'usd', 1), job_state.fail(token, 'permanent')
  FROM job_state.claim('dl', 'w', max_jobs => 1);
SELECT id - :first AS n, status, reason FROM job_state.job WHERE queue = 'dl' ORDER BY id;
-- by reason: only the permanent errors, oldest first; the jobs whose limits
-- are still used up are refused, with the reason, and stay as they are
SELECT job_id - :first AS n, outcome, reason, run_after = now() AS now
  FROM job_state.redrive_many('dl', reason => 'permanent_error');
-- the redriven jobs: accepted, a new generation (old tokens die), retry counter reset
SELECT id - :first AS n, status, reason, generation, retries, run_after = now() AS now
  FROM job_state.job WHERE queue = 'dl' ORDER BY id;
-- per_second: the k-th redriven job (from 0) waits exactly k / per_second;
-- refused rows take no turn
SELECT job_id - :first AS n, outcome, reason, run_after - now() AS wait
  FROM job_state.redrive_many('dl', per_second => 4);
SELECT id - :first AS n, run_after - min(run_after) OVER () AS spacing
  FROM job_state.job WHERE queue = 'dl' AND id - :first IN (3, 4) ORDER BY id;
-- a meter the job has not: refused per row
SELECT job_id - :first AS n, outcome, reason FROM job_state.redrive_many('dl', extra_budget => '{"tokens": 5}');
-- the extras that make the refused ones runnable
SELECT job_id - :first AS n, outcome, reason FROM job_state.redrive_many('dl', extra_attempts => 1);
SELECT job_id - :first AS n, outcome, reason FROM job_state.redrive_many('dl', extra_budget => '{"usd": 1}');
SELECT id - :first AS n, status, max_attempts, budget FROM job_state.job WHERE queue = 'dl' ORDER BY id;
-- cancelled jobs are not dead letters (redrive runs one again)
SELECT * FROM job_state.redrive_many('dl', max_jobs => 10000, per_second => 1000000);
SELECT job_state.redrive(:first + 5);
-- max_jobs: at most that many a call
SELECT job_state.create_queue('dl2', max_retries => 0);
SELECT count(*) FROM job_state.submit_many('dl2', array_fill('{}'::jsonb, ARRAY[7]));
SELECT count(*) FROM (SELECT job_state.fail(token, 'permanent') FROM job_state.claim('dl2', 'w', max_jobs => 7)) f;
SELECT count(*) FROM job_state.redrive_many('dl2', max_jobs => 3);
SELECT count(*) FROM job_state.redrive_many('dl2', max_jobs => 3);
SELECT count(*) FROM job_state.redrive_many('dl2', max_jobs => 3);
SELECT status, count(*) FROM job_state.job WHERE queue = 'dl2' GROUP BY status;

-- errors
SELECT * FROM job_state.redrive_many('nope');
SELECT * FROM job_state.redrive_many(NULL);
SELECT * FROM job_state.redrive_many('dl', max_jobs => NULL);
SELECT * FROM job_state.redrive_many('dl', max_jobs => 0);
SELECT * FROM job_state.redrive_many('dl', max_jobs => 10001);
SELECT * FROM job_state.redrive_many('dl', per_second => 0);
SELECT * FROM job_state.redrive_many('dl', per_second => -1);
SELECT * FROM job_state.redrive_many('dl', per_second => 'NaN');
SELECT * FROM job_state.redrive_many('dl', per_second => 'Infinity');
SELECT * FROM job_state.redrive_many('dl', per_second => 1000001);
\set VERBOSITY default
SELECT * FROM job_state.redrive_many('dl', max_jobs => 10000, per_second => 0.00001);
\set VERBOSITY sqlstate
SELECT * FROM job_state.redrive_many('dl', extra_attempts => -1);
SELECT * FROM job_state.redrive_many('dl', extra_budget => '[1]');
SELECT * FROM job_state.redrive_many('dl', extra_budget => '{"usd": -1}');
BEGIN READ ONLY;
SELECT * FROM job_state.redrive_many('dl');
ROLLBACK;
-- operate on the queue is needed (submit is not enough)
SELECT job_state.grant_queue('dl', 'regress_js_bulk', 'submit');
SELECT job_state.revoke_queue('dl', 'public', 'all');
SET ROLE regress_js_bulk;
SELECT * FROM job_state.redrive_many('dl');
RESET ROLE;
SELECT job_state.grant_queue('dl', 'regress_js_bulk', 'operate');
SET ROLE regress_js_bulk;
SELECT count(*) FROM job_state.redrive_many('dl');
RESET ROLE;

SET job_state.drop_live_jobs = on;
DROP OWNED BY regress_js_bulk, regress_js_bulk_other;
DROP ROLE regress_js_bulk, regress_js_bulk_other;
