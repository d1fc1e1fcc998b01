-- claim, heartbeat, assert_claim, lease expiry and late completions
\getenv abs_srcdir PG_ABS_SRCDIR
\i :abs_srcdir/sql/include/fresh_extension.sql
\set VERBOSITY sqlstate
SELECT job_state.create_queue('cq', lease => '1 min', max_lease => '10 min');
SELECT count(*) FROM (SELECT job_state.submit('cq', jsonb_build_object('n', i)) FROM generate_series(1, 5) i) s;

-- a batch: generation and attempts bumped, lease set, worker recorded
SELECT job_id, attempt, input, deadline FROM job_state.claim('cq', 'w1', max_jobs => 2);
SELECT id, status, generation, attempts, worker,
       lease_expires_at BETWEEN clock_timestamp() + interval '50 s' AND clock_timestamp() + interval '1 min' AS lease_1min,
       started_at IS NOT NULL AS started
  FROM job_state.job WHERE status = 'running' ORDER BY id;
-- the lease argument overrides the queue's, capped at max_lease
SELECT token AS t3 FROM job_state.claim('cq', 'w1', lease => '5 min') \gset
SELECT lease_expires_at > clock_timestamp() + interval '4 min' AS lease_5min FROM job_state.job WHERE id = 3;
SELECT token AS t4 FROM job_state.claim('cq', 'w1', lease => '1 day') \gset
SELECT lease_expires_at <= started_at + interval '10 min' AS capped FROM job_state.job WHERE id = 4;

-- argument errors
SELECT * FROM job_state.claim('cq', 'w', max_jobs => 0);
SELECT * FROM job_state.claim('cq', 'w', max_jobs => 10001);
SELECT * FROM job_state.claim('cq', 'w', lease => '0 s');
SELECT * FROM job_state.claim('cq', 'w', lease => '-1 min');
SELECT * FROM job_state.claim(NULL, 'w');
SELECT * FROM job_state.claim('cq', NULL);
SELECT * FROM job_state.claim('cq', 'w', max_jobs => NULL);
SELECT * FROM job_state.claim('nope', 'w');

-- heartbeat: extends, never past started_at + max_lease
SELECT lease_expires_at > clock_timestamp() + interval '1 min' AS extended,
       cancel_requested FROM job_state.heartbeat(:'t3', '2 min');
SELECT lease_expires_at = (SELECT started_at + interval '10 min' FROM job_state.job WHERE id = 4) AS capped
  FROM job_state.heartbeat(:'t4', '1 day');
SELECT * FROM job_state.heartbeat(:'t3', '0 s');
SELECT * FROM job_state.heartbeat(NULL);

-- assert_claim: the current claim passes
SELECT job_state.assert_claim(:'t3');

-- lease expiry (judged by the database clock): the job becomes unknown, not failed
UPDATE job_state.job SET lease_expires_at = clock_timestamp() - interval '1 s' WHERE id = 3;
-- heartbeat on an expired lease is refused, even before any sweep
SELECT * FROM job_state.heartbeat(:'t3');
\set VERBOSITY default
SELECT * FROM job_state.heartbeat(:'t3');
\set VERBOSITY sqlstate
SELECT job_state.sweep() AS moved;
SELECT id, status, reason, generation, lease_expires_at, finished_at IS NOT NULL AS finished
  FROM job_state.job WHERE id = 3;
-- heartbeat on an unknown job: JS001 (succeed/fail still accepted)
\set VERBOSITY default
SELECT * FROM job_state.heartbeat(:'t3');
\set VERBOSITY sqlstate
-- assert_claim on an unknown job with the current generation passes
SELECT job_state.assert_claim(:'t3');
-- a late completion with the current generation resolves unknown
SELECT job_state.succeed(:'t3', '{"late": true}');
SELECT id, status, reason, result FROM job_state.job WHERE id = 3;
-- succeeded is final: a second succeed is refused
SELECT job_state.succeed(:'t3');
SELECT job_state.fail(:'t3', 'permanent');

-- a stale worker: expiry, re-claim, then the old token is refused everywhere
SELECT job_state.create_queue('rq', on_lease_expiry => 'retry', retry_interval => '0',
       jitter => 'none', max_retries => 5);
SELECT job_id FROM job_state.submit('rq', '{"r": 1}');
SELECT token AS old FROM job_state.claim('rq', 'w-old') \gset
UPDATE job_state.job SET lease_expires_at = clock_timestamp() - interval '1 s' WHERE queue = 'rq';
-- claim applies expiry lazily (retry queue: requeued as a retry) and takes the job again
SELECT job_id, attempt FROM job_state.claim('rq', 'w-new');
SELECT token AS new FROM job_state.claim('rq', 'w-new');
SELECT status, generation, attempts, retries, worker FROM job_state.job WHERE queue = 'rq';
SELECT job_state.succeed(:'old');
\set VERBOSITY default
SELECT job_state.succeed(:'old');
\set VERBOSITY sqlstate
SELECT job_state.fail(:'old', 'transient');
SELECT * FROM job_state.heartbeat(:'old');
SELECT job_state.assert_claim(:'old');
SELECT job_state.reserve(:'old', 'm', 1);
-- the refusals were counted, though each refused call rolled back
SELECT queue, stale_refusals FROM job_state.queue_stats WHERE queue = 'rq';
-- the stale worker's writes in the same transaction roll back with it
CREATE TABLE side_effects (what text);
BEGIN;
INSERT INTO side_effects VALUES ('stale write');
SELECT job_state.succeed(:'old');
COMMIT;
SELECT count(*) AS stale_writes FROM side_effects;

-- the job with its events
SELECT from_status, to_status, generation, detail FROM job_state.job_event
 WHERE queue = 'rq' ORDER BY seq;

-- claim never returns a job of another queue, or a job another claim holds
SELECT count(*) AS nothing_left FROM job_state.claim('rq', 'w', max_jobs => 10);

-- a queue with a tiny max_lease: the default lease is least('5 min', max_lease)
SELECT job_state.create_queue('short', max_lease => '30 s');
SELECT job_id FROM job_state.submit('short', '{}');
SELECT count(*) FROM job_state.claim('short', 'w');
SELECT lease_expires_at <= started_at + interval '30 s' AS within_max_lease
  FROM job_state.job WHERE queue = 'short';

-- claim writes: refused in a read-only transaction (as on a standby),
-- with nothing taken
SELECT job_id FROM job_state.submit('short', '{"ro": true}') \gset ro_
BEGIN READ ONLY;
SELECT count(*) FROM job_state.claim('short', 'w');
ROLLBACK;
SELECT status FROM job_state.job WHERE id = :ro_job_id;
-- and so do succeed and fail
SELECT token AS ro_t FROM job_state.claim('short', 'w') \gset
BEGIN READ ONLY;
SELECT job_state.succeed(:'ro_t');
ROLLBACK;
BEGIN READ ONLY;
SELECT job_state.fail(:'ro_t', 'permanent');
ROLLBACK;
SELECT status FROM job_state.job WHERE id = :ro_job_id;
-- claim sees what its own transaction wrote before it, even in the same
-- statement: a queue created just before
BEGIN;
SELECT job_state.create_queue('inline') IS NOT NULL AS created,
       (SELECT count(*) FROM job_state.claim('inline', 'w')) AS claimed;
ROLLBACK;
