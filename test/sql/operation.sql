-- side effects at most once per operation id
\getenv abs_srcdir PG_ABS_SRCDIR
\i :abs_srcdir/sql/include/fresh_extension.sql
\set VERBOSITY sqlstate
SELECT job_state.create_queue('ops', on_lease_expiry => 'retry', retry_interval => '0', jitter => 'none');
SELECT job_id FROM job_state.submit('ops', '{"mail": "welcome"}');
SELECT token AS t1 FROM job_state.claim('ops', 'w1') \gset

-- attempt 1: begins two side effects, finishes one, then its lease runs out
SELECT * FROM job_state.begin_operation(:'t1', 'send-mail');
SELECT * FROM job_state.begin_operation(:'t1', 'charge-card');
SELECT job_state.finish_operation(:'t1', 'send-mail', '{"message_id": "m-1"}');
-- the same attempt asking again: done comes back with its result
SELECT * FROM job_state.begin_operation(:'t1', 'send-mail');
UPDATE job_state.job SET lease_expires_at = clock_timestamp() - interval '1 s';
SELECT token AS t2 FROM job_state.claim('ops', 'w2') \gset

-- attempt 2: the mail is done (do not send again), the charge is in doubt
SELECT * FROM job_state.begin_operation(:'t2', 'send-mail');
SELECT * FROM job_state.begin_operation(:'t2', 'charge-card');
SELECT * FROM job_state.begin_operation(:'t2', 'write-report');
-- the stale attempt can neither begin nor finish anything
SELECT * FROM job_state.begin_operation(:'t1', 'charge-card');
SELECT job_state.finish_operation(:'t1', 'charge-card', '{"charge": "ch_1"}');
-- attempt 2 checked the payment system with op_id as idempotency key
SELECT job_state.finish_operation(:'t2', 'charge-card', '{"charge": "ch_1"}');
SELECT op_id, state, generation, result FROM job_state.operation ORDER BY op_id;

-- errors
SELECT job_state.finish_operation(:'t2', 'charge-card', '{"charge": "ch_2"}');
\set VERBOSITY default
SELECT job_state.finish_operation(:'t2', 'charge-card', '{"charge": "ch_2"}');
SELECT job_state.finish_operation(:'t2', 'never-begun');
\set VERBOSITY sqlstate
SELECT * FROM job_state.begin_operation(:'t2', '');
SELECT * FROM job_state.begin_operation(:'t2', repeat('x', 256));
SELECT * FROM job_state.begin_operation(:'t2', NULL);
SELECT * FROM job_state.begin_operation(NULL, 'x');

-- finished operations are immutable, also for raw SQL
UPDATE job_state.operation SET result = '{"charge": "ch_3"}' WHERE op_id = 'charge-card';
UPDATE job_state.operation SET state = 'started' WHERE op_id = 'send-mail';
DELETE FROM job_state.operation;
TRUNCATE job_state.operation;
-- an unfinished one may still be finished by raw SQL (an operator's reconciliation)
UPDATE job_state.operation SET state = 'done', result = '{"report": "r-1"}' WHERE op_id = 'write-report';

-- purge removes them with their job
SELECT job_state.succeed(:'t2');
SELECT job_state.purge('0');
SELECT count(*) AS operations_left FROM job_state.operation;

-- abandon_operation: an attempt that failed before it called the external
-- system says so, and the next attempt's begin_operation answers new (not
-- in_doubt); only the attempt that began it, under its current claim
SELECT job_id AS a FROM job_state.submit('ops', '{"mail": "reminder"}') \gset
SELECT token AS a1 FROM job_state.claim('ops', 'w1') \gset
SELECT * FROM job_state.begin_operation(:'a1', 'send-reminder');
SELECT * FROM job_state.begin_operation(:'a1', 'charge-late-fee');
SELECT * FROM job_state.begin_operation(:'a1', 'post-audit');
SELECT job_state.finish_operation(:'a1', 'post-audit', '{"audit": "a-1"}');
SELECT job_state.abandon_operation(:'a1', 'send-reminder');
-- again: nothing changes
SELECT job_state.abandon_operation(:'a1', 'send-reminder');
SELECT op_id, state, generation, finished_at IS NOT NULL AS finished
  FROM job_state.operation WHERE job_id = :a ORDER BY op_id;
-- a done operation was performed: refused; one never begun: JS008
\set VERBOSITY default
SELECT job_state.abandon_operation(:'a1', 'post-audit');
SELECT job_state.abandon_operation(:'a1', 'never-begun');
\set VERBOSITY sqlstate
SELECT job_state.abandon_operation(:'a1', NULL);
SELECT job_state.abandon_operation(:'a1', '');
-- the lease runs out; attempt 2: the abandoned one is new, the other in doubt
UPDATE job_state.job SET lease_expires_at = clock_timestamp() - interval '1 s' WHERE id = :a;
SELECT token AS a2 FROM job_state.claim('ops', 'w2') \gset
-- the old token is refused once a newer claim exists
SELECT job_state.abandon_operation(:'a1', 'charge-late-fee');
SELECT * FROM job_state.begin_operation(:'a2', 'send-reminder');
SELECT * FROM job_state.begin_operation(:'a2', 'charge-late-fee');
SELECT * FROM job_state.begin_operation(:'a2', 'post-audit');
-- attempt 2 cannot abandon what attempt 1 began: only attempt 1 knew
\set VERBOSITY default
SELECT job_state.abandon_operation(:'a2', 'charge-late-fee');
\set VERBOSITY sqlstate
SELECT op_id, state, generation, finished_at IS NOT NULL AS finished
  FROM job_state.operation WHERE job_id = :a ORDER BY op_id;
-- the claim privilege is needed, as for begin_operation
CREATE ROLE regress_js_ops_cb;
SELECT job_state.revoke_queue('ops', 'public', 'all');
SELECT job_state.grant_queue('ops', 'regress_js_ops_cb', 'callback');
GRANT USAGE ON SCHEMA job_state TO regress_js_ops_cb;
GRANT EXECUTE ON FUNCTION job_state.abandon_operation(job_state.claim_token, text) TO regress_js_ops_cb;
SET ROLE regress_js_ops_cb;
SELECT job_state.abandon_operation(:'a2', 'send-reminder');
RESET ROLE;
SELECT job_state.succeed(:'a2');
SELECT job_state.abandon_operation(:'a2', 'send-reminder');
DROP OWNED BY regress_js_ops_cb;
DROP ROLE regress_js_ops_cb;
