-- operator calls: reconcile, redrive, cancel, purge; dead letters and stats
\getenv abs_srcdir PG_ABS_SRCDIR
\i :abs_srcdir/sql/include/fresh_extension.sql
\set VERBOSITY sqlstate
SELECT job_state.create_queue('op', retry_interval => '0', jitter => 'none');
SELECT count(*) FROM (SELECT job_state.submit('op', jsonb_build_object('n', i)) FROM generate_series(1, 8) i) s;
CREATE TABLE toks AS SELECT token, job_id FROM job_state.claim('op', 'w', max_jobs => 6);
-- jobs 1..3 end unknown (lease expiry), 4 fails permanently, 5 succeeds, 6 runs
UPDATE job_state.job SET lease_expires_at = clock_timestamp() - interval '1 s' WHERE id <= 3;
SELECT job_state.sweep() AS moved;
SELECT job_state.fail(token, 'permanent', '{"msg": "bad"}') FROM toks WHERE job_id = 4;
SELECT job_state.succeed(token) FROM toks WHERE job_id = 5;

-- dead letters: failed and unknown jobs
SELECT job_id, queue, status, reason, last_error, finished_at IS NOT NULL AS finished
  FROM job_state.dead_letters ORDER BY job_id;

-- reconcile resolves unknown jobs only
SELECT job_state.reconcile(1, 'succeeded', '{"found": "charge ch_1 exists"}');
SELECT job_state.reconcile(2, 'failed', '{"found": "nothing"}');
SELECT job_state.reconcile(3, 'accepted');
SELECT id, status, reason, result, last_error, generation FROM job_state.job WHERE id <= 3 ORDER BY id;
SELECT job_state.reconcile(1, 'failed');
\set VERBOSITY default
SELECT job_state.reconcile(4, 'succeeded');
\set VERBOSITY sqlstate
SELECT job_state.reconcile(3, 'running');
SELECT job_state.reconcile(3, 'unknown');
SELECT job_state.reconcile(999, 'failed');
SELECT job_state.reconcile(NULL, 'failed');
-- the old token of job 3 died: reconcile to accepted bumped the generation
SELECT job_state.succeed(token) FROM toks WHERE job_id = 3;

-- redrive: failed, unknown and cancelled only
SELECT job_state.redrive(4);
SELECT status, reason, retries, generation FROM job_state.job WHERE id = 4;
SELECT job_state.redrive(5);
SELECT job_state.redrive(6);
SELECT job_state.redrive(999);
SELECT job_state.redrive(4, extra_attempts => -1);

-- cancel
SELECT job_state.cancel(7, 'no longer needed');
SELECT job_state.cancel(7);
SELECT job_state.cancel(6);
SELECT job_state.cancel(5);
SELECT job_state.cancel(2);
SELECT job_state.cancel(999);
SELECT id, status, reason, cancel_requested FROM job_state.job WHERE id IN (5, 6, 7) ORDER BY id;
-- a cancelled job can be redriven
SELECT job_state.redrive(7);
SELECT status, reason, generation FROM job_state.job WHERE id = 7;
-- lease expiry of a job with a cancel request ends it cancelled
UPDATE job_state.job SET lease_expires_at = clock_timestamp() - interval '1 s' WHERE id = 6;
SELECT job_state.sweep() AS moved;
SELECT status, reason FROM job_state.job WHERE id = 6;

-- stats: one row per queue
SELECT job_state.create_queue('empty');
SELECT queue, accepted, running, succeeded, failed, unknown, cancelled, dead_letters,
       stale_refusals, oldest_waiting IS NOT NULL AS has_waiting,
       wait_p50 IS NOT NULL AS has_wait, run_p95 IS NOT NULL AS has_run,
       throttle_rate
  FROM job_state.queue_stats ORDER BY queue;

-- purge: only finished jobs older than the interval, with their history
SELECT job_state.purge('1 hour') AS purged_recent;
SELECT job_state.purge('0') AS purged;
SELECT id, status FROM job_state.job ORDER BY id;
SELECT count(*) AS orphan_events FROM job_state.job_event e
 WHERE NOT EXISTS (SELECT 1 FROM job_state.job j WHERE j.id = e.job_id);
SELECT job_state.purge('-1 s');
SELECT job_state.purge(NULL);
-- after a purge the idempotency key can be used again
SELECT job_id AS k FROM job_state.submit('op', '{"k": 1}', 'again') \gset
SELECT job_state.cancel(:k);
SELECT created FROM job_state.submit('op', '{"k": 2}', 'again');
SELECT job_state.purge('0') AS purged;
SELECT created FROM job_state.submit('op', '{"k": 2}', 'again');

-- by id alone: the job table has no index on id by itself; the calls find
-- a job's queue through the primary key (queue, id), one probe per queue,
-- and never read the table sequentially
SELECT job_state.create_queue('op_' || i) FROM generate_series(1, 3) i;
SELECT job_id AS far FROM job_state.submit('op_3', '{"far": 1}') \gset
SELECT job_id AS near FROM job_state.submit('op_1', '{"near": 1}') \gset
-- (in a table of a few pages a sequential read is the cheaper plan: give it
-- the size of a real queue's)
SELECT count(*) AS bulk FROM generate_series(1, 3000) i,
       LATERAL job_state.submit('op_2', jsonb_build_object('bulk', i)) s;
ANALYZE job_state.job;
SELECT pg_stat_force_next_flush();
SELECT seq_scan AS seq0 FROM pg_stat_user_tables WHERE relid = 'job_state.job'::regclass \gset
SELECT job_state.cancel(:far);
SELECT job_state.redrive(:far);
SELECT job_state.cancel(:near, 'by id');
SELECT job_state.reconcile(:near, 'failed');
SELECT job_state.cancel(:far + 1000000);
SELECT pg_stat_force_next_flush();
SELECT seq_scan - :seq0 AS seq_scans FROM pg_stat_user_tables
 WHERE relid = 'job_state.job'::regclass;
SELECT queue, status, reason FROM job_state.job WHERE id IN (:far, :near) ORDER BY id;
SELECT indexrelid::regclass AS job_indexes FROM pg_index
 WHERE indrelid = 'job_state.job'::regclass ORDER BY 1::text;

-- vacuum keeps the pages a purge empties at the end of the job and history
-- tables (vacuum_truncate = false: no ACCESS EXCLUSIVE lock on them)
SELECT job_state.create_queue('vt');
SELECT count(job_state.cancel(s.job_id))
  FROM generate_series(1, 400) i,
       LATERAL job_state.submit('vt', jsonb_build_object('n', i)) s;
SELECT pg_relation_size('job_state.job') AS job0,
       pg_relation_size('job_state.job_event_log') AS event0 \gset
SELECT job_state.purge('0') AS purged;
VACUUM job_state.job, job_state.job_event_log;
SELECT pg_relation_size('job_state.job') = :job0 AS job_kept,
       pg_relation_size('job_state.job_event_log') = :event0 AS event_kept,
       (SELECT count(*) FROM job_state.job WHERE queue = 'vt') AS vt_jobs;
-- and VACUUM (TRUNCATE) gives them back when asked
VACUUM (TRUNCATE) job_state.job_event_log;
SELECT pg_relation_size('job_state.job_event_log') < :event0 AS event_truncated;
