-- the least-privilege recipe of the README: submitter, worker, operator,
-- as regress_* roles (the names of a server's own recipe roles are left
-- alone); roles a failed earlier run left are dropped first
SET client_min_messages = warning;
SET job_state.drop_live_jobs = on;
DROP EXTENSION job_state CASCADE;
RESET job_state.drop_live_jobs;
DROP ROLE IF EXISTS regress_js_submitter, regress_js_worker,
	regress_js_operator, regress_js_nobody;
RESET client_min_messages;
CREATE EXTENSION job_state;
\set VERBOSITY sqlstate
SELECT job_state.create_queue('sec');

CREATE ROLE regress_js_submitter;
CREATE ROLE regress_js_worker;
CREATE ROLE regress_js_operator;
CREATE ROLE regress_js_nobody;
GRANT USAGE ON SCHEMA job_state TO regress_js_submitter, regress_js_worker, regress_js_operator;
GRANT EXECUTE ON FUNCTION job_state.submit(text, jsonb, text, timestamptz, int, int,
	timestamptz, jsonb, text, text) TO regress_js_submitter;
GRANT SELECT ON job_state.my_jobs TO regress_js_submitter;
GRANT EXECUTE ON FUNCTION job_state.claim(text, text, interval, int),
	job_state.heartbeat(job_state.claim_token, interval, jsonb),
	job_state.assert_claim(job_state.claim_token),
	job_state.succeed(job_state.claim_token, jsonb),
	job_state.succeed_many(job_state.claim_token[], jsonb[]),
	job_state.fail(job_state.claim_token, job_state.error_class, jsonb, interval),
	job_state.charge(job_state.claim_token, text, numeric),
	job_state.reserve(job_state.claim_token, text, numeric)
	TO regress_js_worker;
GRANT EXECUTE ON FUNCTION job_state.reconcile(bigint, job_state.status, jsonb),
	job_state.redrive(bigint, int, jsonb, timestamptz),
	job_state.cancel(bigint, text),
	job_state.purge(interval),
	job_state.sweep()
	TO regress_js_operator;
GRANT SELECT ON ALL TABLES IN SCHEMA job_state TO regress_js_operator;
REVOKE SELECT ON job_state.secret FROM regress_js_operator;

-- PUBLIC has nothing
SET ROLE regress_js_nobody;
SELECT * FROM job_state.submit('sec', '{}');
SELECT * FROM job_state.claim('sec', 'w');
SELECT count(*) FROM job_state.job;
SELECT count(*) FROM job_state.secret;
RESET ROLE;
-- nor even with the schema: no function, no table
GRANT USAGE ON SCHEMA job_state TO regress_js_nobody;
SET ROLE regress_js_nobody;
SELECT * FROM job_state.submit('sec', '{}');
SELECT count(*) FROM job_state.job;
SELECT job_state.sweep();
RESET ROLE;

-- the submitter submits and reads its own jobs, nothing else
SET ROLE regress_js_submitter;
SELECT job_id, created FROM job_state.submit('sec', '{"from": "submitter"}', 'sub-1');
SELECT job_id, queue, status, input FROM job_state.my_jobs;
SELECT * FROM job_state.claim('sec', 'w');
SELECT count(*) FROM job_state.job;
SELECT job_state.cancel(1);
SELECT job_state.create_queue('mine');
RESET ROLE;
-- submit records the calling role, not the definer; SET ROLE is followed
SELECT id, submitted_by FROM job_state.job;
SELECT job_id FROM job_state.submit('sec', '{"from": "superuser"}');

-- the worker claims and acts through tokens only
SET ROLE regress_js_worker;
SELECT token AS t FROM job_state.claim('sec', 'w1') \gset
SELECT job_state.heartbeat(:'t') IS NOT NULL AS beat;
SELECT job_state.assert_claim(:'t');
UPDATE job_state.job SET status = 'succeeded';
SELECT * FROM job_state.submit('sec', '{}');
SELECT job_state.redrive(1);
SELECT count(*) FROM job_state.my_jobs;
SELECT job_state.succeed(:'t', '{"ok": true}');
RESET ROLE;

-- the submitter sees the result; never the other role's job
SET ROLE regress_js_submitter;
SELECT job_id, status, result FROM job_state.my_jobs;
RESET ROLE;

-- the operator reads everything but the secret, and runs the operator calls
SET ROLE regress_js_operator;
SELECT id, status FROM job_state.job ORDER BY id;
SELECT job_state.cancel(2, 'operator says so');
SELECT job_state.redrive(2);
SELECT job_state.sweep();
SELECT count(*) FROM job_state.secret;
SELECT job_state.purge('0');
SELECT queue, succeeded, accepted FROM job_state.queue_stats;
UPDATE job_state.job SET priority = 5;
SELECT * FROM job_state.claim('sec', 'w');
RESET ROLE;

-- a role allowed to write job by raw SQL has its changes recorded with no
-- privilege on job_event: history is the system's record, and it cannot
-- write (forge) history rows itself
GRANT UPDATE ON job_state.job TO regress_js_operator;
SET ROLE regress_js_operator;
UPDATE job_state.job SET status = 'cancelled', reason = 'raw cancel' WHERE id = 2
RETURNING id, status;
INSERT INTO job_state.job_event (queue, job_id, to_status, generation)
VALUES ('sec', 2, 'succeeded', 1);
SELECT from_status, to_status, detail FROM job_state.job_event
 WHERE job_id = 2 ORDER BY seq DESC LIMIT 1;
RESET ROLE;

-- every mutating function is SECURITY DEFINER with a pinned search_path
-- (wait is a procedure that only reads: it commits between its reads, which
-- PostgreSQL allows only without SECURITY DEFINER and SET; wait.c reads as
-- the tables' owner and checks the caller's privileges itself;
-- wal_timeline only reads the server's WAL timeline)
SELECT p.proname
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE n.nspname = 'job_state' AND p.provolatile = 'v' AND p.prorettype <> 'trigger'::regtype
   AND p.proname NOT IN ('new_secret', 'retry_delay', 'wait', 'wal_timeline')
   AND NOT (p.prosecdef AND p.proconfig @> ARRAY['search_path=pg_catalog, pg_temp'])
 ORDER BY 1;

DROP OWNED BY regress_js_submitter, regress_js_worker, regress_js_operator, regress_js_nobody;
DROP ROLE regress_js_submitter, regress_js_worker, regress_js_operator, regress_js_nobody;
