/* job_state 0.1.0 -> 0.2.0: upgrade script */

\echo Use "ALTER EXTENSION job_state UPDATE TO '0.2.0'" to load this file. \quit

/*
 * 0.1.0 is released and its install script is frozen.  Every schema change
 * of 0.2.0 goes here, in the order of the install script (types, tables,
 * trigger functions and triggers, API, views, privileges).  A fresh
 * CREATE EXTENSION runs job_state--0.1.0.sql and then this file, so a fresh
 * install and an upgraded one are the same schema by construction; the
 * upgrade test checks it with data in place.
 */

/*
 * create_resource: concurrency_limit gets a default (NULL, no limit), so
 * that a resource with only a start rate can be created by name,
 * create_resource('api', max_starts_per_second => 5).  Names, types and
 * the other default stay as 0.1.0 had them; the C function already takes
 * a NULL limit (and refuses two NULLs).
 */
CREATE OR REPLACE FUNCTION job_state.create_resource(
	name pg_catalog.text,
	concurrency_limit pg_catalog.int4 DEFAULT NULL,
	max_starts_per_second pg_catalog.float8 DEFAULT NULL)
	RETURNS void
	AS 'MODULE_PATHNAME', 'js_create_resource'
	LANGUAGE C VOLATILE PARALLEL UNSAFE
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION job_state.create_resource(pg_catalog.text, pg_catalog.int4, pg_catalog.float8) IS
	'a limit shared by all queues whose jobs name it: at most concurrency_limit running (NULL: no limit), at most max_starts_per_second starts (NULL: no rate); at least one of the two';

/*
 * The drop guard: DROP EXTENSION job_state (or DROP OWNED BY its owner)
 * is refused while jobs that are not finished exist, unless
 * job_state.drop_live_jobs is on in the dropping session (drop_guard.c).
 * An event trigger, so it works without shared_preload_libraries; a member
 * of the extension, so it goes with it; SECURITY DEFINER, so that it can
 * count the jobs whoever drops.
 */
CREATE FUNCTION job_state.drop_guard()
	RETURNS event_trigger
	AS 'MODULE_PATHNAME', 'js_drop_guard'
	LANGUAGE C VOLATILE PARALLEL UNSAFE
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION job_state.drop_guard() IS
	'event trigger: refuses DROP EXTENSION job_state while accepted, running or unknown jobs exist, unless job_state.drop_live_jobs is on';
REVOKE ALL ON FUNCTION job_state.drop_guard() FROM PUBLIC;

CREATE EVENT TRIGGER job_state_drop_guard
	ON ddl_command_start
	WHEN TAG IN ('DROP EXTENSION', 'DROP OWNED')
	EXECUTE FUNCTION job_state.drop_guard();
COMMENT ON EVENT TRIGGER job_state_drop_guard IS
	'refuses to drop the extension while jobs that are not finished exist (SET job_state.drop_live_jobs = on to drop them on purpose)';

/*
 * MAC key rotation.  The newest key of job_state.secret signs new tokens
 * and a token verifies under any of the eight newest (token.c), so
 * rotate_secret() keeps the tokens in flight valid for one rotation and
 * refuses those of every retired key.  Every statement that changes the
 * table, raw SQL included, sends its relcache invalidation at commit, so
 * every backend drops its cached keys before its next transaction.
 */
COMMENT ON TABLE job_state.secret IS
	'per-database MAC keys for claim tokens: the newest signs, each of the eight newest verifies; change them with rotate_secret()';

CREATE FUNCTION job_state.secret_trigger()
	RETURNS trigger
	AS 'MODULE_PATHNAME', 'js_secret_trigger'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION job_state.secret_trigger() IS
	'after any change to job_state.secret: every backend drops its cached MAC keys at commit';
REVOKE ALL ON FUNCTION job_state.secret_trigger() FROM PUBLIC;

CREATE TRIGGER job_state_secret_changed
	AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON job_state.secret
	FOR EACH STATEMENT EXECUTE FUNCTION job_state.secret_trigger();
ALTER TABLE job_state.secret ENABLE ALWAYS TRIGGER job_state_secret_changed;

CREATE FUNCTION job_state.rotate_secret(keep_previous pg_catalog.bool DEFAULT true)
	RETURNS pg_catalog.int4
	AS 'MODULE_PATHNAME', 'js_rotate_secret'
	LANGUAGE C VOLATILE PARALLEL UNSAFE
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION job_state.rotate_secret(pg_catalog.bool) IS
	'a new MAC key signs tokens from the commit on; the previous key still verifies unless keep_previous is false, older keys are retired (their tokens get JS007); returns how many keys were retired';
REVOKE ALL ON FUNCTION job_state.rotate_secret(pg_catalog.bool) FROM PUBLIC;

/*
 * Every trigger of ours fires whatever session_replication_role says: a
 * session that may set it to replica (a superuser, a role granted SET on
 * it) must not step past the state machine, the append-only history, the
 * slot bookkeeping or the guards on queues and resources.  A logical
 * replication subscriber of these tables runs them too, on every applied
 * row.
 */
ALTER TABLE job_state.queue ENABLE ALWAYS TRIGGER job_state_queue;
ALTER TABLE job_state.queue ENABLE ALWAYS TRIGGER job_state_queue_slots;
ALTER TABLE job_state.queue ENABLE ALWAYS TRIGGER job_state_queue_truncate;
ALTER TABLE job_state.resource ENABLE ALWAYS TRIGGER job_state_resource;
ALTER TABLE job_state.resource ENABLE ALWAYS TRIGGER job_state_resource_limits;
ALTER TABLE job_state.resource ENABLE ALWAYS TRIGGER job_state_resource_truncate;
ALTER TABLE job_state.job ENABLE ALWAYS TRIGGER job_state_fsm;
ALTER TABLE job_state.job ENABLE ALWAYS TRIGGER job_state_event;
ALTER TABLE job_state.job ENABLE ALWAYS TRIGGER job_state_truncate;
ALTER TABLE job_state.job_event ENABLE ALWAYS TRIGGER job_state_append_only;
ALTER TABLE job_state.job_event ENABLE ALWAYS TRIGGER job_state_append_only_truncate;
ALTER TABLE job_state.spend ENABLE ALWAYS TRIGGER job_state_spend_append_only;
ALTER TABLE job_state.spend ENABLE ALWAYS TRIGGER job_state_spend_append_only_truncate;
ALTER TABLE job_state.operation ENABLE ALWAYS TRIGGER job_state_operation;
ALTER TABLE job_state.operation ENABLE ALWAYS TRIGGER job_state_operation_truncate;
