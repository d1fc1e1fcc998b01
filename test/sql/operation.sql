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
