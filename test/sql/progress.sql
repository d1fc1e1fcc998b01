-- progress: heartbeat(token, extend, progress) stores the latest progress of the current claim
\getenv abs_srcdir PG_ABS_SRCDIR
\i :abs_srcdir/sql/include/fresh_extension.sql
\set VERBOSITY sqlstate
SELECT job_state.create_queue('p', retry_interval => '0', jitter => 'none');
SELECT job_id AS j FROM job_state.submit('p', '{"pages": 10}') \gset
SELECT token AS t1 FROM job_state.claim('p', 'w1') \gset

-- nothing reported yet
SELECT progress, progress_generation, progress_at FROM job_state.job WHERE id = :j;
SELECT cancel_requested FROM job_state.heartbeat(:'t1', progress => '{"page": 1}');
SELECT progress, progress_generation, progress_at IS NOT NULL AS stamped, generation
  FROM job_state.job WHERE id = :j;
-- a heartbeat without progress keeps the last one; with it, replaces it
SELECT cancel_requested FROM job_state.heartbeat(:'t1');
SELECT cancel_requested FROM job_state.heartbeat(:'t1', '1 min');
SELECT progress FROM job_state.job WHERE id = :j;
SELECT cancel_requested FROM job_state.heartbeat(:'t1', '1 min', '{"page": 4, "note": "ocr"}');
SELECT progress FROM job_state.job WHERE id = :j;
SELECT progress_at <= clock_timestamp() AND progress_at >= started_at AS in_order
  FROM job_state.job WHERE id = :j;

-- bounded: at most 64 kB of jsonb
SELECT cancel_requested FROM job_state.heartbeat(:'t1', progress => jsonb_build_object('log', repeat('x', 65000)));
SELECT octet_length(progress->>'log') AS stored FROM job_state.job WHERE id = :j;
SELECT job_state.heartbeat(:'t1', progress => jsonb_build_object('log', repeat('x', 70000)));
\set VERBOSITY default
SELECT job_state.heartbeat(:'t1', progress => jsonb_build_object('log', repeat('x', 70000)));
\set VERBOSITY sqlstate
SELECT octet_length(progress->>'log') AS still FROM job_state.job WHERE id = :j;
-- the other checks still come first
SELECT job_state.heartbeat(NULL, progress => '{}');
SELECT job_state.heartbeat(:'t1', '-1 s', '{}');
-- a JSON null is a value, not "no progress"
SELECT cancel_requested FROM job_state.heartbeat(:'t1', progress => 'null');
SELECT progress FROM job_state.job WHERE id = :j;

-- a forged token learns nothing about the job: JS007 (the argument checks, which need no job, come first)
SELECT left(:'t1', 42) || CASE WHEN right(:'t1', 1) = 'A' THEN 'Q' ELSE 'A' END AS forged \gset
SELECT job_state.heartbeat(:'forged', progress => '{"page": 99}');
SELECT job_state.heartbeat(:'forged', progress => jsonb_build_object('log', repeat('x', 70000)));

-- fenced by generation: a retry's new claim; the old worker can no longer report
SELECT cancel_requested FROM job_state.heartbeat(:'t1', progress => '{"page": 5}');
SELECT job_state.fail(:'t1', 'transient');
SELECT job_state.heartbeat(:'t1', progress => '{"page": 6}');
SELECT token AS t2 FROM job_state.claim('p', 'w2') \gset
SELECT job_state.heartbeat(:'t1', progress => '{"page": 7}');
-- the new attempt sees the last progress and which attempt reported it
SELECT progress, progress_generation, generation FROM job_state.job WHERE id = :j;
SELECT cancel_requested FROM job_state.heartbeat(:'t2', progress => '{"page": 1, "resumed": true}');
SELECT progress, progress_generation, generation FROM job_state.job WHERE id = :j;
-- progress stays on the finished job; a heartbeat after the end is refused
SELECT job_state.succeed(:'t2', '{"pages": 10}');
SELECT job_state.heartbeat(:'t2', progress => '{"page": 11}');
SELECT status, progress, progress_generation FROM job_state.job WHERE id = :j;

-- visible in my_jobs and queue_jobs (their last columns)
SELECT job_id, status, progress, progress_generation, progress_at IS NOT NULL AS stamped
  FROM job_state.my_jobs WHERE job_id = :j;
SELECT job_id, progress, progress_generation FROM job_state.queue_jobs WHERE job_id = :j;

-- a tenant without read on the queue does not see it; one without claim cannot report
SET client_min_messages = warning;
DROP ROLE IF EXISTS regress_js_progress_reader, regress_js_progress_other;
RESET client_min_messages;
CREATE ROLE regress_js_progress_reader;
CREATE ROLE regress_js_progress_other;
GRANT USAGE ON SCHEMA job_state TO regress_js_progress_reader, regress_js_progress_other;
GRANT SELECT ON job_state.queue_jobs TO regress_js_progress_reader, regress_js_progress_other;
GRANT EXECUTE ON FUNCTION job_state.heartbeat(job_state.claim_token, interval, jsonb)
	TO regress_js_progress_reader, regress_js_progress_other;
SELECT job_state.revoke_queue('p', 'public', 'all');
SELECT job_state.grant_queue('p', 'regress_js_progress_reader', 'read');
SELECT job_id AS j2 FROM job_state.submit('p', '{"pages": 3}') \gset
SELECT token AS t3 FROM job_state.claim('p', 'w3') \gset
SELECT cancel_requested FROM job_state.heartbeat(:'t3', progress => '{"page": 2}');
-- a reader of the queue sees the progress, but cannot report (claim privilege)
SET ROLE regress_js_progress_reader;
SELECT job_id, progress FROM job_state.queue_jobs WHERE job_id = :j2;
SELECT job_state.heartbeat(:'t3', progress => '{"page": 3}');
RESET ROLE;
-- a role without read sees none of the queue's jobs, and cannot report either
SET ROLE regress_js_progress_other;
SELECT count(*) AS seen FROM job_state.queue_jobs;
SELECT job_state.heartbeat(:'t3', progress => '{"page": 3}');
RESET ROLE;
SELECT progress FROM job_state.job WHERE id = :j2;
SELECT job_state.succeed(:'t3');

DROP OWNED BY regress_js_progress_reader, regress_js_progress_other;
DROP ROLE regress_js_progress_reader, regress_js_progress_other;
