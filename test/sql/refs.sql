-- references: add_ref attaches external ids to the job of the current claim, find_job finds the jobs again
\getenv abs_srcdir PG_ABS_SRCDIR
\i :abs_srcdir/sql/include/fresh_extension.sql
\set VERBOSITY sqlstate
SELECT job_state.create_queue('agents', retry_interval => '0', jitter => 'none');
SELECT job_id AS j FROM job_state.submit('agents', '{"task": "summarise"}') \gset
SELECT token AS t1 FROM job_state.claim('agents', 'w1') \gset

SELECT job_state.add_ref(:'t1', 'agent_session', 'sess-1') AS added;
SELECT job_state.add_ref(:'t1', 'execution_id', 'exec-9') AS added;
-- the same reference again is harmless
SELECT job_state.add_ref(:'t1', 'agent_session', 'sess-1') AS added;
SELECT queue, job_id, kind, ref, generation, added_at IS NOT NULL AS stamped
  FROM job_state.job_ref ORDER BY kind;
SELECT * FROM job_state.find_job('agent_session', 'sess-1');
SELECT * FROM job_state.find_job('agent_session', 'nope');
SELECT * FROM job_state.find_job('execution_id', 'sess-1');

-- arguments
SELECT job_state.add_ref(NULL, 'k', 'r');
SELECT job_state.add_ref(:'t1', NULL, 'r');
SELECT job_state.add_ref(:'t1', 'k', NULL);
SELECT job_state.add_ref(:'t1', '', 'r');
SELECT job_state.add_ref(:'t1', repeat('k', 129), 'r');
SELECT job_state.add_ref(:'t1', 'k', '');
SELECT job_state.add_ref(:'t1', 'k', repeat('r', 256));
\set VERBOSITY default
SELECT job_state.add_ref(:'t1', 'k', repeat('r', 256));
SELECT job_state.find_job(repeat('k', 129), 'r');
\set VERBOSITY sqlstate
SELECT job_state.add_ref(:'t1', repeat('k', 128), repeat('r', 255)) AS longest;
SELECT job_state.find_job(NULL, 'r');
SELECT job_state.find_job('k', '');

-- a forged token: JS007
SELECT left(:'t1', 42) || CASE WHEN right(:'t1', 1) = 'A' THEN 'Q' ELSE 'A' END AS forged \gset
SELECT job_state.add_ref(:'forged', 'agent_session', 'sess-x');

-- fenced: a stale token cannot add; an expired lease (unknown) with the current token still can
SELECT job_state.fail(:'t1', 'transient');
SELECT job_state.add_ref(:'t1', 'agent_session', 'sess-2');
SELECT token AS t2 FROM job_state.claim('agents', 'w2', lease => '1 min') \gset
SELECT job_state.add_ref(:'t1', 'agent_session', 'sess-2');
SELECT job_state.add_ref(:'t2', 'agent_session', 'sess-2') AS added;
UPDATE job_state.job SET lease_expires_at = clock_timestamp() - interval '1 s' WHERE id = :j;
SELECT job_state.sweep() AS moved;
SELECT status FROM job_state.job WHERE id = :j;
SELECT job_state.add_ref(:'t2', 'execution_id', 'exec-10') AS added_while_unknown;
SELECT kind, ref, generation FROM job_state.job_ref ORDER BY generation, kind, ref;
-- append-only (TRUNCATE is refused as for job_event, while jobs that are not finished exist)
UPDATE job_state.job_ref SET ref = 'other';
DELETE FROM job_state.job_ref;
TRUNCATE job_state.job_ref;
-- a finished job takes no more
SELECT job_state.succeed(:'t2');
SELECT job_state.add_ref(:'t2', 'execution_id', 'exec-11');
SELECT * FROM job_state.find_job('execution_id', 'exec-10');


-- tenants: a role without read on the queue finds nothing, not even that the reference exists
SET client_min_messages = warning;
DROP ROLE IF EXISTS regress_js_refs_reader, regress_js_refs_other;
RESET client_min_messages;
CREATE ROLE regress_js_refs_reader;
CREATE ROLE regress_js_refs_other;
GRANT USAGE ON SCHEMA job_state TO regress_js_refs_reader, regress_js_refs_other;
GRANT EXECUTE ON FUNCTION job_state.find_job(text, text),
	job_state.add_ref(job_state.claim_token, text, text)
	TO regress_js_refs_reader, regress_js_refs_other;
SELECT job_state.create_queue('other');
SELECT job_id AS k FROM job_state.submit('other', '{}') \gset
SELECT token AS t3 FROM job_state.claim('other', 'w3') \gset
SELECT job_state.add_ref(:'t3', 'agent_session', 'sess-1') AS added;
SELECT job_state.revoke_queue('agents', 'public', 'all');
SELECT job_state.revoke_queue('other', 'public', 'all');
SELECT job_state.grant_queue('agents', 'regress_js_refs_reader', 'read');
SET ROLE regress_js_refs_reader;
SELECT * FROM job_state.find_job('agent_session', 'sess-1');
-- read is not claim: no adding with a token of the queue
SELECT job_state.add_ref(:'t3', 'agent_session', 'sess-3');
RESET ROLE;
SET ROLE regress_js_refs_other;
SELECT count(*) AS found FROM job_state.find_job('agent_session', 'sess-1');
SELECT job_state.add_ref(:'t3', 'agent_session', 'sess-3');
SELECT * FROM job_state.job_ref;
RESET ROLE;
-- the callback privilege allows succeed, fail and heartbeat with a token
-- and nothing else: add_ref needs the claim privilege
SELECT job_state.grant_queue('other', 'regress_js_refs_other', 'callback');
GRANT EXECUTE ON FUNCTION job_state.heartbeat(job_state.claim_token, interval, jsonb)
	TO regress_js_refs_other;
SET ROLE regress_js_refs_other;
\set VERBOSITY default
SELECT job_state.add_ref(:'t3', 'agent_session', 'sess-cb');
\set VERBOSITY sqlstate
SELECT lease_expires_at IS NOT NULL AS heartbeat_with_callback FROM job_state.heartbeat(:'t3');
RESET ROLE;
-- a worker whose claim privilege was revoked (it still reads the queue)
-- is told it needs claim
SELECT job_state.grant_queue('other', 'regress_js_refs_reader', 'claim');
SELECT job_state.grant_queue('other', 'regress_js_refs_reader', 'read');
GRANT EXECUTE ON FUNCTION job_state.heartbeat(job_state.claim_token, interval, jsonb)
	TO regress_js_refs_reader;
SET ROLE regress_js_refs_reader;
SELECT job_state.add_ref(:'t3', 'agent_session', 'sess-claim') AS added_with_claim;
RESET ROLE;
SELECT job_state.revoke_queue('other', 'regress_js_refs_reader', 'claim');
SET ROLE regress_js_refs_reader;
\set VERBOSITY default
SELECT lease_expires_at FROM job_state.heartbeat(:'t3');
\set VERBOSITY sqlstate
RESET ROLE;
-- one left with no privilege on the queue is answered as if it did not exist
SELECT job_state.revoke_queue('other', 'regress_js_refs_reader', 'read');
SET ROLE regress_js_refs_reader;
\set VERBOSITY default
SELECT lease_expires_at FROM job_state.heartbeat(:'t3');
\set VERBOSITY sqlstate
RESET ROLE;
-- the extension owner sees both
SELECT * FROM job_state.find_job('agent_session', 'sess-1');
SELECT job_state.succeed(:'t3');
DROP OWNED BY regress_js_refs_reader, regress_js_refs_other;
DROP ROLE regress_js_refs_reader, regress_js_refs_other;

-- references go with their job: purge, and retention
SELECT job_state.purge('0') AS purged;
SELECT count(*) AS refs_left FROM job_state.job_ref;
SET job_state.min_retention = 1;
SELECT job_state.alter_queue('agents', retention => '1 s');
SELECT job_id AS m FROM job_state.submit('agents', '{"task": "again"}') \gset
SELECT token AS t4 FROM job_state.claim('agents', 'w4') \gset
SELECT job_state.add_ref(:'t4', 'agent_session', 'sess-4') AS added;
SELECT job_state.succeed(:'t4');
SELECT pg_sleep(1.2);
SELECT job_state.sweep() AS deleted;
SELECT count(*) AS refs_left FROM job_state.job_ref;
RESET job_state.min_retention;

-- a job waiting for a callback: its worker may still attach references,
-- and the heartbeat that keeps its window open may report progress
SELECT job_state.alter_queue('agents', retention => '0');
SELECT job_id AS jw FROM job_state.submit('agents', '{"task": "wait"}') \gset
SELECT token AS tw FROM job_state.claim('agents', 'w5') \gset
SELECT status FROM job_state.wait_for_callback(:'tw', '1 hour', heartbeat => '10 min');
SELECT job_state.add_ref(:'tw', 'execution_id', 'exec-waiting') AS added;
SELECT job_id = :jw AS found, status FROM job_state.find_job('execution_id', 'exec-waiting');
SELECT lease_expires_at <= clock_timestamp() + interval '10 min' AS window_moved
  FROM job_state.heartbeat(:'tw', progress => '{"step": "approval"}');
SELECT status, progress, progress_generation = generation AS this_attempt
  FROM job_state.job WHERE id = :jw;
SELECT job_state.succeed(:'tw');
SELECT job_state.add_ref(:'tw', 'execution_id', 'exec-late');
