-- the drop guard: DROP EXTENSION job_state (or DROP OWNED BY its owner) is
-- refused while jobs that are not finished exist, unless
-- job_state.drop_live_jobs is on; other drops are not in its way
\getenv abs_srcdir PG_ABS_SRCDIR
\i :abs_srcdir/sql/include/fresh_extension.sql
\set VERBOSITY default
SELECT evtname, evtevent, evttags, evtenabled FROM pg_event_trigger
 WHERE evtname = 'job_state_drop_guard';

-- no job at all: the drop goes
DROP EXTENSION job_state;
CREATE EXTENSION job_state;
-- only finished jobs: the drop goes
SELECT job_state.create_queue('dg', retry_interval => '1 h', jitter => 'none');
SELECT job_id AS j FROM job_state.submit('dg', '{"n": 1}') \gset
SELECT job_state.cancel(:j);
DROP EXTENSION job_state;
CREATE EXTENSION job_state;

-- jobs in every state: 2 accepted, 1 running, 1 unknown, and finished ones
SELECT job_state.create_queue('dg', retry_interval => '1 h', jitter => 'none');
SELECT count(*) FROM (SELECT job_state.submit('dg', jsonb_build_object('n', i))
                        FROM generate_series(1, 7) i) s;
SELECT array_agg(token ORDER BY job_id) AS t FROM job_state.claim('dg', 'w', max_jobs => 5) \gset
SELECT job_state.succeed((:'t'::job_state.claim_token[])[1]);
SELECT job_state.fail((:'t'::job_state.claim_token[])[2], 'permanent');
SELECT job_state.fail((:'t'::job_state.claim_token[])[3], 'unknown');
SELECT job_state.fail((:'t'::job_state.claim_token[])[4], 'transient');
SELECT job_state.cancel(7);
SELECT status, count(*) FROM job_state.job GROUP BY status ORDER BY status;

-- refused: plain, CASCADE, IF EXISTS, among other names
DROP EXTENSION job_state;
\echo :LAST_ERROR_SQLSTATE
DROP EXTENSION job_state CASCADE;
\echo :LAST_ERROR_SQLSTATE
DROP EXTENSION IF EXISTS no_such_extension, job_state CASCADE;
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS jobs_kept FROM job_state.job;

-- other drops are not in its way, also with live jobs
CREATE EXTENSION isn;
DROP EXTENSION isn;
DROP EXTENSION IF EXISTS no_such_extension;
CREATE SCHEMA regress_dg_other;
CREATE TABLE regress_dg_other.t (n int);
DROP SCHEMA regress_dg_other CASCADE;
-- the extension's own schema and objects cannot be dropped on their own
-- (PostgreSQL refuses: they belong to the extension), with or without CASCADE
DROP SCHEMA job_state CASCADE;
\echo :LAST_ERROR_SQLSTATE
DROP TABLE job_state.job CASCADE;
\echo :LAST_ERROR_SQLSTATE
DROP FUNCTION job_state.sweep();
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS jobs_kept FROM job_state.job;

-- the setting is for superusers only
CREATE ROLE regress_dg_user;
SET ROLE regress_dg_user;
SET job_state.drop_live_jobs = on;
\echo :LAST_ERROR_SQLSTATE
-- a role that may not drop the extension gets the permission error, not
-- the guard's (which would lock the job table on its behalf)
DROP EXTENSION job_state;
\echo :LAST_ERROR_SQLSTATE
-- (terse: PostgreSQL 17 adds a detail to this error)
\set VERBOSITY terse
DROP OWNED BY CURRENT_USER, SESSION_USER;
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY default
RESET ROLE;
DROP ROLE regress_dg_user;

-- a refused drop inside a transaction leaves everything as it was
BEGIN;
SAVEPOINT s;
DROP EXTENSION job_state CASCADE;
ROLLBACK TO SAVEPOINT s;
SELECT count(*) AS jobs_kept FROM job_state.job;
COMMIT;

-- finishing the live jobs lets the drop go without the setting
BEGIN;
SELECT job_state.cancel(id) FROM job_state.job
 WHERE status IN ('accepted', 'unknown') ORDER BY id;
SELECT job_state.fail((:'t'::job_state.claim_token[])[5], 'permanent');
SELECT status, count(*) FROM job_state.job GROUP BY status ORDER BY status;
DROP EXTENSION job_state;
SELECT count(*) AS installed FROM pg_extension WHERE extname = 'job_state';
ROLLBACK;

-- forced on purpose: the setting, in this session
SET job_state.drop_live_jobs = on;
DROP EXTENSION job_state CASCADE;
RESET job_state.drop_live_jobs;
SELECT count(*) AS installed FROM pg_extension WHERE extname = 'job_state';

-- DROP OWNED BY the extension's owner would drop it too
CREATE ROLE regress_dg_owner SUPERUSER;
SET ROLE regress_dg_owner;
CREATE EXTENSION job_state;
SELECT job_state.create_queue('dg');
SELECT count(*) FROM job_state.submit('dg', '{"n": 1}');
RESET ROLE;
DROP OWNED BY regress_dg_owner;
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS installed FROM pg_extension WHERE extname = 'job_state';
-- DROP OWNED BY another role is not in its way
CREATE ROLE regress_dg_other;
DROP OWNED BY regress_dg_other;
-- CURRENT_USER is the role that runs the command, not the extension's owner
SET ROLE regress_dg_other;
DROP OWNED BY CURRENT_USER;
RESET ROLE;
SET ROLE regress_dg_owner;
DROP OWNED BY regress_dg_other, CURRENT_USER;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
DROP ROLE regress_dg_other;
SET job_state.drop_live_jobs = on;
DROP OWNED BY regress_dg_owner;
RESET job_state.drop_live_jobs;
SELECT count(*) AS installed FROM pg_extension WHERE extname = 'job_state';
DROP ROLE regress_dg_owner;

-- an install of 0.1.0 has no guard; ALTER EXTENSION UPDATE brings it
CREATE EXTENSION job_state VERSION '0.1.0';
SELECT count(*) AS guards FROM pg_event_trigger WHERE evtname = 'job_state_drop_guard';
SELECT job_state.create_queue('dg');
SELECT count(*) FROM job_state.submit('dg', '{"n": 1}');
ALTER EXTENSION job_state UPDATE TO '0.2.0';
SELECT count(*) AS guards FROM pg_event_trigger WHERE evtname = 'job_state_drop_guard';
DROP EXTENSION job_state;
\echo :LAST_ERROR_SQLSTATE
SET job_state.drop_live_jobs = on;
DROP EXTENSION job_state;
RESET job_state.drop_live_jobs;
CREATE EXTENSION job_state;
