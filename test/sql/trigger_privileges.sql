-- trigger_privileges: the job triggers' own statements run as the owner of
-- job_state, under no one's search_path
SET client_min_messages = warning;
SET job_state.drop_live_jobs = on;
DROP EXTENSION job_state CASCADE;
RESET job_state.drop_live_jobs;
DROP ROLE IF EXISTS regress_js_raw_operator;
DROP SCHEMA IF EXISTS regress_evil CASCADE;
RESET client_min_messages;
CREATE EXTENSION job_state;
\set VERBOSITY default

SELECT job_state.create_queue('q', per_key_limit => 1);
SELECT job_state.create_resource('gpu', 2);
SELECT job_id AS j FROM job_state.submit('q', '{"n": 1}', concurrency_key => 'k1') \gset

-- The README's operator, given UPDATE on job_state.job and nothing else,
-- may write raw SQL: the limit bookkeeping the triggers do (resource
-- exists, queue uses resources, per-key slots) once failed with
-- "permission denied for table resource" and "... queue".
CREATE ROLE regress_js_raw_operator;
GRANT USAGE ON SCHEMA job_state TO regress_js_raw_operator;
GRANT SELECT, UPDATE ON job_state.job TO regress_js_raw_operator;
SET ROLE regress_js_raw_operator;
UPDATE job_state.job SET resource = 'gpu' WHERE id = :j;
UPDATE job_state.job SET concurrency_key = 'k2' WHERE id = :j;
-- the rules still hold for it
UPDATE job_state.job SET resource = 'nope' WHERE id = :j;
RESET ROLE;
SELECT kind, scope, key, pg_catalog.count(*) AS slots
  FROM job_state.slot GROUP BY kind, scope, key ORDER BY kind, scope, key;
SELECT uses_resources FROM job_state.queue WHERE name = 'q';
SELECT current_user = session_user AS back_to_the_caller;

-- A superuser's raw UPDATE under a search_path with a planted "=" ahead of
-- pg_catalog: none of the triggers' statements may resolve to it.
CREATE SCHEMA regress_evil;
CREATE FUNCTION regress_evil.eq(text, text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	RAISE NOTICE 'planted operator ran as %', current_user;
	RETURN $1 OPERATOR(pg_catalog.=) $2;
END $$;
CREATE OPERATOR regress_evil.= (LEFTARG = text, RIGHTARG = text, FUNCTION = regress_evil.eq);
SET search_path = regress_evil, pg_catalog, public;
UPDATE job_state.job SET resource = NULL, concurrency_key = 'k3'
 WHERE id OPERATOR(pg_catalog.=) :j;
UPDATE job_state.job SET resource = 'gpu' WHERE id OPERATOR(pg_catalog.=) :j;
RESET search_path;
SELECT resource, concurrency_key FROM job_state.job WHERE id = :j;

DROP SCHEMA regress_evil CASCADE;
REVOKE ALL ON job_state.job FROM regress_js_raw_operator;
REVOKE ALL ON SCHEMA job_state FROM regress_js_raw_operator;
DROP ROLE regress_js_raw_operator;
