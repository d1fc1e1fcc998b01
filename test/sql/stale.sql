-- JS001 says what happened to the job after the token's claim and what the
-- worker should do: finished, failed, cancelled, retry scheduled, claimed
-- again by a newer worker, redriven or reconciled by an operator, lease
-- expired; the SQLSTATE is JS001 in every case
\getenv abs_srcdir PG_ABS_SRCDIR
\i :abs_srcdir/sql/include/fresh_extension.sql
\set VERBOSITY default
SELECT job_state.create_queue('st', retry_interval => '1 h', jitter => 'none');
SELECT job_state.create_queue('st_retry', on_lease_expiry => 'retry', retry_interval => '0',
       jitter => 'none', max_retries => 5);

-- succeeded: the same succeed again (a retry after a lost answer) is
-- harmless; one with another result, and a heartbeat after it, are refused
SELECT job_id AS j FROM job_state.submit('st', '{"case": "succeeded"}') \gset
SELECT token AS t FROM job_state.claim('st', 'w1') \gset
SELECT job_state.succeed(:'t');
SELECT job_state.succeed(:'t');
SELECT job_state.succeed(:'t', '{"another": "result"}');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM job_state.heartbeat(:'t');
\echo :LAST_ERROR_SQLSTATE

-- failed (permanent): the hint names redrive
SELECT job_id AS j FROM job_state.submit('st', '{"case": "failed"}') \gset
SELECT token AS t FROM job_state.claim('st', 'w1') \gset
SELECT job_state.fail(:'t', 'permanent');
SELECT * FROM job_state.heartbeat(:'t');
\echo :LAST_ERROR_SQLSTATE

-- cancelled while running: the failure ends it cancelled
SELECT job_id AS j FROM job_state.submit('st', '{"case": "cancelled"}') \gset
SELECT token AS t FROM job_state.claim('st', 'w1') \gset
SELECT job_state.cancel(:j, 'customer asked');
SELECT job_state.fail(:'t', 'transient');
SELECT job_state.succeed(:'t');
\echo :LAST_ERROR_SQLSTATE

-- a retry scheduled by the worker's own transient failure
SELECT job_id AS j FROM job_state.submit('st', '{"case": "retry"}') \gset
SELECT token AS t FROM job_state.claim('st', 'w1') \gset
SELECT job_state.fail(:'t', 'transient');
SELECT * FROM job_state.heartbeat(:'t');
\echo :LAST_ERROR_SQLSTATE
SELECT job_state.cancel(:j);

-- the worker itself reported the outcome unknown
SELECT job_id AS j FROM job_state.submit('st', '{"case": "outcome_unknown"}') \gset
SELECT token AS t FROM job_state.claim('st', 'w1') \gset
SELECT job_state.fail(:'t', 'unknown');
SELECT * FROM job_state.heartbeat(:'t');
\echo :LAST_ERROR_SQLSTATE

-- the lease expired: running, then unknown after a sweep
SELECT job_id AS j FROM job_state.submit('st', '{"case": "expired"}') \gset
SELECT token AS t FROM job_state.claim('st', 'w1') \gset
UPDATE job_state.job SET lease_expires_at = clock_timestamp() - interval '1 s' WHERE id = :j;
SELECT * FROM job_state.heartbeat(:'t');
\echo :LAST_ERROR_SQLSTATE
SELECT job_state.sweep() AS moved;
SELECT * FROM job_state.heartbeat(:'t');
\echo :LAST_ERROR_SQLSTATE

-- ... and an operator redrove it: not a newer worker's claim
SELECT job_state.redrive(:j);
SELECT job_state.succeed(:'t');
\echo :LAST_ERROR_SQLSTATE
-- still a redrive once a new worker has claimed it since
SELECT token AS t2 FROM job_state.claim('st', 'w2') \gset
SELECT job_state.succeed(:'t');
\echo :LAST_ERROR_SQLSTATE
-- the new worker's token works
SELECT job_state.succeed(:'t2');

-- an operator reconciled an unknown job to run again
SELECT job_id AS j FROM job_state.submit('st', '{"case": "reconcile accepted"}') \gset
SELECT token AS t FROM job_state.claim('st', 'w1') \gset
UPDATE job_state.job SET lease_expires_at = clock_timestamp() - interval '1 s' WHERE id = :j;
SELECT job_state.sweep() AS moved;
SELECT job_state.reconcile(:j, 'accepted');
SELECT job_state.succeed(:'t');
\echo :LAST_ERROR_SQLSTATE
SELECT job_state.cancel(:j);

-- an operator reconciled an unknown job as succeeded
SELECT job_id AS j FROM job_state.submit('st', '{"case": "reconcile succeeded"}') \gset
SELECT token AS t FROM job_state.claim('st', 'w1') \gset
UPDATE job_state.job SET lease_expires_at = clock_timestamp() - interval '1 s' WHERE id = :j;
SELECT job_state.sweep() AS moved;
SELECT job_state.reconcile(:j, 'succeeded', '{"by": "operator"}');
SELECT * FROM job_state.heartbeat(:'t');
\echo :LAST_ERROR_SQLSTATE

-- claimed again by a newer worker after the lease expired (retry queue)
SELECT job_id AS j FROM job_state.submit('st_retry', '{"case": "reclaimed"}') \gset
SELECT token AS t FROM job_state.claim('st_retry', 'w-old') \gset
UPDATE job_state.job SET lease_expires_at = clock_timestamp() - interval '1 s' WHERE id = :j;
SELECT token AS t2 FROM job_state.claim('st_retry', 'w-new') \gset
SELECT job_state.succeed(:'t');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM job_state.heartbeat(:'t');
\echo :LAST_ERROR_SQLSTATE
SELECT job_state.succeed(:'t2');

-- without history (job_state.track_events off) only the generations are known
SET job_state.track_events = off;
SELECT job_id AS j FROM job_state.submit('st', '{"case": "no history"}') \gset
SELECT token AS t FROM job_state.claim('st', 'w1') \gset
UPDATE job_state.job SET lease_expires_at = clock_timestamp() - interval '1 s' WHERE id = :j;
SELECT job_state.sweep() AS moved;
SELECT job_state.redrive(:j);
SELECT job_state.succeed(:'t');
\echo :LAST_ERROR_SQLSTATE
RESET job_state.track_events;

-- every refusal was counted
SELECT queue, stale_refusals FROM job_state.queue_stats WHERE queue LIKE 'st%' ORDER BY queue;
