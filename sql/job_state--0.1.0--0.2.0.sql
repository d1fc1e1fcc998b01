/* job_state 0.1.0 -> 0.2.0: upgrade script */

\echo Use "ALTER EXTENSION job_state UPDATE TO '0.2.0'" to load this file. \quit

/*
 * Brings a 0.1.0 database to 0.2.0 with its data in place.  A fresh
 * CREATE EXTENSION runs the full install script job_state--0.2.0.sql
 * instead; every schema change of 0.2.0 is written in both, and
 * test/t/007_upgrade.pl checks that the two give the same schema.
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
/* session_replication_role = replica must not switch the guard off */
ALTER EVENT TRIGGER job_state_drop_guard ENABLE ALWAYS;

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

/*
 * ---- Per-queue privileges (acl.c) and role identities -------------------
 * A queue's privileges are an aclitem[] checked with PostgreSQL's aclmask:
 * submit (INSERT, a), claim and act with its tokens (UPDATE, w), operate
 * (DELETE, d), read (SELECT, r).  NULL: never granted on, open to every
 * role that may execute the functions.  grant_queue and revoke_queue are
 * for the owner (nothing is granted to PUBLIC).
 */
ALTER TABLE job_state.queue ADD COLUMN acl pg_catalog.aclitem[]
	CONSTRAINT queue_acl_valid
	CHECK (acl IS NULL OR pg_catalog.cardinality(acl) OPERATOR(pg_catalog.=) 0
		   OR (pg_catalog.array_ndims(acl) OPERATOR(pg_catalog.=) 1
			   AND pg_catalog.array_position(acl, NULL) IS NULL));
COMMENT ON COLUMN job_state.queue.acl IS
	'the queue''s privileges (a = submit, w = claim and act, d = operate, r = read); NULL: open to every role that may execute the functions';

/*
 * Who submitted a job is the role's OID (regrole), not its name: a rename
 * keeps a role's jobs, a role dropped and created again under the same
 * name does not inherit them.  Names of roles that no longer exist become
 * 0 ('-').  The rewrite of job_state.job takes an ACCESS EXCLUSIVE lock for
 * its duration.  my_jobs does not show the column: it is swapped out of
 * the view's definition for the change, keeping the view's grants.
 */
CREATE OR REPLACE VIEW job_state.my_jobs WITH (security_barrier) AS
	SELECT id AS job_id, queue, status, idempotency_key, input, result,
		   last_error, reason, attempts, accepted_at, started_at, finished_at
	  FROM job_state.job
	 WHERE false;
ALTER TABLE job_state.job
	ALTER COLUMN submitted_by DROP DEFAULT,
	ALTER COLUMN submitted_by TYPE pg_catalog.regrole
		USING COALESCE(pg_catalog.to_regrole(pg_catalog.quote_ident(submitted_by)),
					   0::pg_catalog.oid::pg_catalog.regrole),
	ALTER COLUMN submitted_by SET DEFAULT
		pg_catalog.to_regrole(pg_catalog.quote_ident(CURRENT_USER));
COMMENT ON COLUMN job_state.job.submitted_by IS
	'the role that submitted the job (the caller of submit, following SET ROLE), by OID: follows renames; 0 once the role is dropped';
CREATE OR REPLACE VIEW job_state.my_jobs WITH (security_barrier) AS
	SELECT id AS job_id, queue, status, idempotency_key, input, result,
		   last_error, reason, attempts, accepted_at, started_at, finished_at
	  FROM job_state.job
	 WHERE submitted_by::pg_catalog.oid OPERATOR(pg_catalog.=)
		   pg_catalog.to_regrole(pg_catalog.quote_ident(CURRENT_USER))::pg_catalog.oid;

CREATE FUNCTION job_state.grant_queue(queue pg_catalog.text,
	grantee pg_catalog.text, VARIADIC privileges pg_catalog.text[])
	RETURNS void
	AS 'MODULE_PATHNAME', 'js_grant_queue'
	LANGUAGE C VOLATILE PARALLEL UNSAFE
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION job_state.grant_queue(pg_catalog.text, pg_catalog.text, pg_catalog.text[]) IS
	'grants privileges on a queue (submit, claim, operate, read, all) to a role or to public; the first grant or revoke on a queue replaces "open to all" by PUBLIC and the owner holding every privilege';
REVOKE ALL ON FUNCTION job_state.grant_queue(pg_catalog.text, pg_catalog.text, pg_catalog.text[]) FROM PUBLIC;

CREATE FUNCTION job_state.revoke_queue(queue pg_catalog.text,
	grantee pg_catalog.text, VARIADIC privileges pg_catalog.text[])
	RETURNS void
	AS 'MODULE_PATHNAME', 'js_revoke_queue'
	LANGUAGE C VOLATILE PARALLEL UNSAFE
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION job_state.revoke_queue(pg_catalog.text, pg_catalog.text, pg_catalog.text[]) IS
	'revokes privileges on a queue (submit, claim, operate, read, all) from a role or from public; reaches every backend when it commits';
REVOKE ALL ON FUNCTION job_state.revoke_queue(pg_catalog.text, pg_catalog.text, pg_catalog.text[]) FROM PUBLIC;

CREATE FUNCTION job_state.has_queue_privilege(queue pg_catalog.text,
	privilege pg_catalog.text)
	RETURNS pg_catalog.bool
	AS 'MODULE_PATHNAME', 'js_has_queue_privilege'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION job_state.has_queue_privilege(pg_catalog.text, pg_catalog.text) IS
	'whether the current user holds a privilege (submit, claim, operate, read, callback, all) on a queue; NULL for no such queue and for a queue it holds no privilege on';

CREATE FUNCTION job_state.has_queue_privilege(role pg_catalog.text,
	queue pg_catalog.text, privilege pg_catalog.text)
	RETURNS pg_catalog.bool
	AS 'MODULE_PATHNAME', 'js_has_queue_privilege_role'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION job_state.has_queue_privilege(pg_catalog.text, pg_catalog.text, pg_catalog.text) IS
	'whether a role (or public) holds a privilege on a queue; NULL for no such queue and for a queue the current user holds no privilege on';

GRANT EXECUTE ON FUNCTION
	job_state.has_queue_privilege(pg_catalog.text, pg_catalog.text),
	job_state.has_queue_privilege(pg_catalog.text, pg_catalog.text, pg_catalog.text)
	TO PUBLIC;

CREATE VIEW job_state.queue_privileges WITH (security_barrier) AS
	SELECT q.name AS queue,
		   CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0::pg_catalog.oid THEN 'public'
				ELSE a.grantee::pg_catalog.regrole::pg_catalog.text END AS grantee,
		   CASE a.privilege_type WHEN 'INSERT' THEN 'submit' WHEN 'UPDATE' THEN 'claim'
				WHEN 'DELETE' THEN 'operate' WHEN 'SELECT' THEN 'read'
				WHEN 'TRIGGER' THEN 'callback' END AS privilege
	  FROM job_state.queue q
	  CROSS JOIN LATERAL pg_catalog.aclexplode(q.acl) a
	 WHERE job_state.has_queue_privilege(q.name, 'operate');
COMMENT ON VIEW job_state.queue_privileges IS
	'one row per grantee and privilege of every queue that has been granted on (queues not listed are open to all), for the queues the current user may operate';
REVOKE ALL ON job_state.queue_privileges FROM PUBLIC;

/*
 * The jobs of the queues the current user may read; tenants read their
 * queues through it (they get no privilege on the tables).
 */
CREATE VIEW job_state.queue_jobs WITH (security_barrier) AS
	SELECT id AS job_id, queue, status, submitted_by, idempotency_key, input,
		   result, last_error, reason, attempts, accepted_at, started_at,
		   finished_at
	  FROM job_state.job
	 WHERE queue OPERATOR(pg_catalog.=) ANY (ARRAY(
		   SELECT q.name FROM job_state.queue q
			WHERE job_state.has_queue_privilege(q.name, 'read')));
COMMENT ON VIEW job_state.queue_jobs IS
	'the jobs of the queues the current user may read (has_queue_privilege(queue, ''read''))';
REVOKE ALL ON job_state.queue_jobs FROM PUBLIC;

CREATE OR REPLACE VIEW job_state.dead_letters AS
	SELECT id AS job_id, queue, status, reason, last_error, finished_at
	  FROM job_state.job
	 WHERE status IN ('failed', 'unknown')
	   AND queue OPERATOR(pg_catalog.=) ANY (ARRAY(
		   SELECT q.name FROM job_state.queue q
			WHERE job_state.has_queue_privilege(q.name, 'read')));
ALTER VIEW job_state.dead_letters SET (security_barrier);
COMMENT ON VIEW job_state.dead_letters IS
	'failed jobs and jobs whose outcome is unknown, of the queues the current user may read: candidates for reconcile or redrive';

/*
 * Waiting for a callback (callback.c): the status waiting, between running
 * and succeeded, and the job's callback timeout and heartbeat interval.  A
 * value added to an enum cannot be used in the transaction that adds it,
 * so nothing below names 'waiting': job_lease covers the jobs with a lease
 * (running and waiting, fsm.c) and queue_stats counts the waiting jobs by
 * their callback timeout, which a job has exactly while it waits.
 */
ALTER TYPE job_state.status ADD VALUE 'waiting' AFTER 'running';
COMMENT ON TYPE job_state.status IS
	'lifecycle of a job: accepted -> running (-> waiting for a callback) -> succeeded | failed | unknown; see the README for every allowed transition';

ALTER TABLE job_state.job
	ADD COLUMN callback_timeout_at pg_catalog.timestamptz,
	ADD COLUMN heartbeat_interval pg_catalog.interval;
COMMENT ON COLUMN job_state.job.callback_timeout_at IS
	'while the job is waiting for a callback: when its outcome becomes unknown if no callback came (lease_expires_at is the waiting window, up to this); NULL otherwise';
COMMENT ON COLUMN job_state.job.heartbeat_interval IS
	'while the job is waiting for a callback: how long each heartbeat keeps the waiting window open (NULL: no heartbeat needed)';

DROP INDEX job_state.job_lease;
/* running and waiting jobs: the only ones with a lease (fsm.c) */
CREATE INDEX job_lease ON job_state.job (queue, lease_expires_at)
	WHERE lease_expires_at IS NOT NULL;

CREATE FUNCTION job_state.wait_for_callback(
	token job_state.claim_token,
	timeout pg_catalog.interval,
	heartbeat pg_catalog.interval DEFAULT NULL,
	release_slots pg_catalog.bool DEFAULT false)
	RETURNS TABLE(status job_state.status, callback_timeout_at pg_catalog.timestamptz,
				  lease_expires_at pg_catalog.timestamptz)
	AS 'MODULE_PATHNAME', 'js_wait_for_callback'
	LANGUAGE C VOLATILE PARALLEL UNSAFE
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION job_state.wait_for_callback(job_state.claim_token, pg_catalog.interval,
	pg_catalog.interval, pg_catalog.bool) IS
	'hands a running job to a system that calls back: the job waits (same generation, so the token is the callback token for succeed, fail and heartbeat) until timeout, or a missed heartbeat, makes it unknown; release_slots gives its concurrency slots up meanwhile; reports the state a faster callback already left';
REVOKE ALL ON FUNCTION job_state.wait_for_callback(job_state.claim_token, pg_catalog.interval,
	pg_catalog.interval, pg_catalog.bool) FROM PUBLIC;
/* ---- end of Waiting for a callback ---------------------------------- */

CREATE OR REPLACE VIEW job_state.queue_stats AS
	SELECT q.name AS queue,
		   s.accepted, s.running, s.succeeded, s.failed, s.unknown, s.cancelled,
		   s.oldest_waiting, s.wait_p50, s.wait_p95, s.run_p50, s.run_p95,
		   s.throttle_rate,
		   s.failed + s.unknown AS dead_letters,
		   COALESCE(r.stale_refusals, 0) AS stale_refusals,
		   s.waiting, s.callback_timeouts
	  FROM job_state.queue q
	  CROSS JOIN LATERAL (
		SELECT pg_catalog.count(*) FILTER (WHERE j.status = 'accepted') AS accepted,
			   pg_catalog.count(*) FILTER (WHERE j.status = 'running') AS running,
			   pg_catalog.count(*) FILTER (WHERE j.status = 'succeeded') AS succeeded,
			   pg_catalog.count(*) FILTER (WHERE j.status = 'failed') AS failed,
			   pg_catalog.count(*) FILTER (WHERE j.status = 'unknown') AS unknown,
			   pg_catalog.count(*) FILTER (WHERE j.status = 'cancelled') AS cancelled,
			   /* a job has a callback timeout exactly while it is waiting (fsm.c) */
			   pg_catalog.count(*) FILTER (WHERE j.callback_timeout_at IS NOT NULL) AS waiting,
			   pg_catalog.count(*) FILTER (WHERE j.reason IN ('callback_timeout', 'heartbeat_timeout'))
				 AS callback_timeouts,
			   pg_catalog.now() - pg_catalog.min(j.run_after)
				 FILTER (WHERE j.status = 'accepted' AND j.run_after <= pg_catalog.now())
				 AS oldest_waiting,
			   pg_catalog.percentile_cont(0.5) WITHIN GROUP (ORDER BY j.started_at - j.accepted_at)
				 FILTER (WHERE j.started_at > pg_catalog.now() - '1 hour'::pg_catalog.interval) AS wait_p50,
			   pg_catalog.percentile_cont(0.95) WITHIN GROUP (ORDER BY j.started_at - j.accepted_at)
				 FILTER (WHERE j.started_at > pg_catalog.now() - '1 hour'::pg_catalog.interval) AS wait_p95,
			   pg_catalog.percentile_cont(0.5) WITHIN GROUP (ORDER BY j.finished_at - j.started_at)
				 FILTER (WHERE j.status IN ('succeeded', 'failed')
						 AND j.finished_at > pg_catalog.now() - '1 hour'::pg_catalog.interval) AS run_p50,
			   pg_catalog.percentile_cont(0.95) WITHIN GROUP (ORDER BY j.finished_at - j.started_at)
				 FILTER (WHERE j.status IN ('succeeded', 'failed')
						 AND j.finished_at > pg_catalog.now() - '1 hour'::pg_catalog.interval) AS run_p95,
			   (pg_catalog.sum(j.throttles) FILTER (WHERE j.started_at > pg_catalog.now() - '1 hour'::pg_catalog.interval))::pg_catalog.float8
				 / NULLIF(pg_catalog.sum(j.attempts) FILTER (WHERE j.started_at > pg_catalog.now() - '1 hour'::pg_catalog.interval), 0)
				 AS throttle_rate
		  FROM job_state.job j
		 WHERE j.queue = q.name) s
	  CROSS JOIN LATERAL (
		SELECT job_state.stale_refusals(q.id) AS stale_refusals) r
	 WHERE job_state.has_queue_privilege(q.name, 'read');
ALTER VIEW job_state.queue_stats SET (security_barrier);
COMMENT ON VIEW job_state.queue_stats IS
	'one row per queue the current user may read: jobs per status, oldest waiting age, wait (accept to start) and run time percentiles over the last hour, throttle rate, dead letters, stale-token refusals, jobs waiting for a callback and jobs whose callback or heartbeat did not come in time';
/* ---- end of Per-queue privileges ------------------------------------ */

/*
 * A queue's spans are added to timestamps (leases, retry waits): raw SQL is
 * held to the 3600 days (10 years of 360 days) that create_queue and
 * alter_queue allow, so no queue's lease or retry wait can run past the
 * timestamp range.  The update fails on a queue that already holds a
 * longer span: shorten it with alter_queue first.
 */
ALTER TABLE job_state.queue ADD CONSTRAINT queue_spans_bounded
	CHECK (lease <= '3600 days' AND max_lease <= '3600 days'
		   AND retry_interval <= '3600 days' AND max_delay <= '3600 days');

/*
 * wait is a procedure: between two reads of the job it commits its own
 * transaction, so it holds no snapshot and no lock while it sleeps.  It is
 * therefore neither SECURITY DEFINER nor has a SET clause (either makes a
 * CALL atomic); each read runs as the job table's owner in C, and checks
 * that the caller submitted the job or may read its queue.
 */
CREATE PROCEDURE job_state.wait(
	job_id pg_catalog.int8,
	timeout pg_catalog.interval,
	OUT status job_state.status,
	OUT result pg_catalog.jsonb,
	OUT last_error pg_catalog.jsonb,
	OUT reason pg_catalog.text,
	OUT finished_at pg_catalog.timestamptz)
	AS 'MODULE_PATHNAME', 'js_wait'
	LANGUAGE C;
COMMENT ON PROCEDURE job_state.wait(pg_catalog.int8, pg_catalog.interval,
	job_state.status, pg_catalog.jsonb, pg_catalog.jsonb, pg_catalog.text,
	pg_catalog.timestamptz) IS
	'waits (CALL in autocommit, at most 1 hour) until a job the caller submitted or may read is succeeded, failed, cancelled or unknown, and returns its outcome; after the timeout, its current state';
REVOKE ALL ON PROCEDURE job_state.wait(pg_catalog.int8, pg_catalog.interval,
	job_state.status, pg_catalog.jsonb, pg_catalog.jsonb, pg_catalog.text,
	pg_catalog.timestamptz) FROM PUBLIC;

/*
 * Retention: a queue keeps its succeeded, failed and cancelled jobs for
 * its retention after they finished (NULL: until purge); sweep() and the
 * sweeper delete older ones, with every row of theirs, in batches
 * (retention.c).  create_queue and alter_queue get the option as a last
 * argument, so the 0.1.0 functions are dropped and made again (with the
 * grants of the fresh install: none for PUBLIC).
 */
ALTER TABLE job_state.queue ADD COLUMN retention pg_catalog.interval
	CONSTRAINT queue_retention_bounded
	CHECK (retention >= '1 s' AND retention <= '3600 days');
COMMENT ON COLUMN job_state.queue.retention IS
	'how long succeeded, failed and cancelled jobs are kept after they finished; sweep() and the sweeper delete older ones with all their rows; NULL: until purge()';

DROP FUNCTION job_state.create_queue(pg_catalog.text, pg_catalog.interval,
	pg_catalog.interval, pg_catalog.interval, pg_catalog.float8, pg_catalog.int4,
	pg_catalog.interval, pg_catalog.text, pg_catalog.int4, pg_catalog.text,
	pg_catalog.int4, pg_catalog.int4);
CREATE FUNCTION job_state.create_queue(
	name pg_catalog.text,
	lease pg_catalog.interval DEFAULT '5 min',
	max_lease pg_catalog.interval DEFAULT '12 hours',
	retry_interval pg_catalog.interval DEFAULT '2 s',
	backoff_rate pg_catalog.float8 DEFAULT 2.0,
	max_retries pg_catalog.int4 DEFAULT 3,
	max_delay pg_catalog.interval DEFAULT '30 s',
	jitter pg_catalog.text DEFAULT 'full',
	max_attempts pg_catalog.int4 DEFAULT NULL,
	on_lease_expiry pg_catalog.text DEFAULT 'unknown',
	concurrency_limit pg_catalog.int4 DEFAULT NULL,
	per_key_limit pg_catalog.int4 DEFAULT NULL,
	retention pg_catalog.interval DEFAULT NULL,
	min_synchronous_commit pg_catalog.text DEFAULT NULL)
	RETURNS void
	AS 'MODULE_PATHNAME', 'js_create_queue'
	LANGUAGE C VOLATILE PARALLEL UNSAFE
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION job_state.create_queue(pg_catalog.text, pg_catalog.interval,
	pg_catalog.interval, pg_catalog.interval, pg_catalog.float8, pg_catalog.int4,
	pg_catalog.interval, pg_catalog.text, pg_catalog.int4, pg_catalog.text,
	pg_catalog.int4, pg_catalog.int4, pg_catalog.interval, pg_catalog.text) IS
	'creates a queue with its lease, retry policy (AWS Step Functions semantics), limits, retention of finished jobs (NULL or ''0'': kept until purge) and durability floor (min_synchronous_commit: submits and calls under its claims commit with at least that synchronous_commit)';

REVOKE ALL ON FUNCTION job_state.create_queue(pg_catalog.text, pg_catalog.interval,
	pg_catalog.interval, pg_catalog.interval, pg_catalog.float8, pg_catalog.int4,
	pg_catalog.interval, pg_catalog.text, pg_catalog.int4, pg_catalog.text,
	pg_catalog.int4, pg_catalog.int4, pg_catalog.interval, pg_catalog.text) FROM PUBLIC;

DROP FUNCTION job_state.alter_queue(pg_catalog.text, pg_catalog.interval,
	pg_catalog.interval, pg_catalog.interval, pg_catalog.float8, pg_catalog.int4,
	pg_catalog.interval, pg_catalog.text, pg_catalog.int4, pg_catalog.text,
	pg_catalog.int4, pg_catalog.int4);
CREATE FUNCTION job_state.alter_queue(
	name pg_catalog.text,
	lease pg_catalog.interval DEFAULT NULL,
	max_lease pg_catalog.interval DEFAULT NULL,
	retry_interval pg_catalog.interval DEFAULT NULL,
	backoff_rate pg_catalog.float8 DEFAULT NULL,
	max_retries pg_catalog.int4 DEFAULT NULL,
	max_delay pg_catalog.interval DEFAULT NULL,
	jitter pg_catalog.text DEFAULT NULL,
	max_attempts pg_catalog.int4 DEFAULT NULL,
	on_lease_expiry pg_catalog.text DEFAULT NULL,
	concurrency_limit pg_catalog.int4 DEFAULT NULL,
	per_key_limit pg_catalog.int4 DEFAULT NULL,
	retention pg_catalog.interval DEFAULT NULL,
	min_synchronous_commit pg_catalog.text DEFAULT NULL)
	RETURNS void
	AS 'MODULE_PATHNAME', 'js_alter_queue'
	LANGUAGE C VOLATILE PARALLEL UNSAFE
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION job_state.alter_queue(pg_catalog.text, pg_catalog.interval,
	pg_catalog.interval, pg_catalog.interval, pg_catalog.float8, pg_catalog.int4,
	pg_catalog.interval, pg_catalog.text, pg_catalog.int4, pg_catalog.text,
	pg_catalog.int4, pg_catalog.int4, pg_catalog.interval, pg_catalog.text) IS
	'changes the options it is given (a NULL argument keeps the current value; retention => ''0'' keeps finished jobs until purge; min_synchronous_commit => ''off'' removes the floor)';

REVOKE ALL ON FUNCTION job_state.alter_queue(pg_catalog.text, pg_catalog.interval,
	pg_catalog.interval, pg_catalog.interval, pg_catalog.float8, pg_catalog.int4,
	pg_catalog.interval, pg_catalog.text, pg_catalog.int4, pg_catalog.text,
	pg_catalog.int4, pg_catalog.int4, pg_catalog.interval, pg_catalog.text) FROM PUBLIC;

COMMENT ON FUNCTION job_state.sweep() IS
	'applies lease expiry in every queue, submits due schedule ticks and deletes one batch (at most 1000 jobs) of finished jobs past their queue''s retention now; returns how many jobs lease expiry moved plus how many retention deleted';

/*
 * Progress: heartbeat(token, extend, progress) stores the latest progress
 * of the current claim (fenced like the lease it extends) in three new
 * columns of job_state.job, shown at the end of my_jobs and queue_jobs.
 * heartbeat gets the argument, so the 0.1.0 function is dropped and made
 * again (none for PUBLIC, as in the fresh install).
 */
ALTER TABLE job_state.job
	ADD COLUMN progress pg_catalog.jsonb,
	ADD COLUMN progress_generation pg_catalog.int4,
	ADD COLUMN progress_at pg_catalog.timestamptz;
COMMENT ON COLUMN job_state.job.progress IS
	'the latest progress a heartbeat of the job reported (at most 64 kB); kept across attempts: progress_generation says which one';
COMMENT ON COLUMN job_state.job.progress_generation IS
	'the generation of the claim whose heartbeat reported progress';
COMMENT ON COLUMN job_state.job.progress_at IS
	'when progress was reported';

DROP FUNCTION job_state.heartbeat(job_state.claim_token, pg_catalog.interval);
CREATE FUNCTION job_state.heartbeat(
	token job_state.claim_token,
	extend pg_catalog.interval DEFAULT NULL,
	progress pg_catalog.jsonb DEFAULT NULL)
	RETURNS TABLE(lease_expires_at pg_catalog.timestamptz,
		cancel_requested pg_catalog.bool)
	AS 'MODULE_PATHNAME', 'js_heartbeat'
	LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 1
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION job_state.heartbeat(job_state.claim_token, pg_catalog.interval, pg_catalog.jsonb) IS
	'extends the lease of a running job (never past started_at + max_lease), stores its progress if given (NULL keeps the last) and reports a cancel request';
REVOKE ALL ON FUNCTION job_state.heartbeat(job_state.claim_token, pg_catalog.interval, pg_catalog.jsonb) FROM PUBLIC;

CREATE OR REPLACE VIEW job_state.my_jobs WITH (security_barrier) AS
	SELECT id AS job_id, queue, status, idempotency_key, input, result,
		   last_error, reason, attempts, accepted_at, started_at, finished_at,
		   progress, progress_generation, progress_at
	  FROM job_state.job
	 WHERE submitted_by::pg_catalog.oid OPERATOR(pg_catalog.=)
		   pg_catalog.to_regrole(pg_catalog.quote_ident(CURRENT_USER))::pg_catalog.oid;

CREATE OR REPLACE VIEW job_state.queue_jobs WITH (security_barrier) AS
	SELECT id AS job_id, queue, status, submitted_by, idempotency_key, input,
		   result, last_error, reason, attempts, accepted_at, started_at,
		   finished_at, progress, progress_generation, progress_at
	  FROM job_state.job
	 WHERE queue OPERATOR(pg_catalog.=) ANY (ARRAY(
		   SELECT q.name FROM job_state.queue q
			WHERE job_state.has_queue_privilege(q.name, 'read')));

/*
 * References: add_ref(token, kind, ref) attaches an external id to the
 * job of the current claim, find_job(kind, ref) finds the jobs again (of
 * the queues the caller may read).  job_state.job_ref is append-only and
 * goes with its job (purge, retention).
 */
CREATE TABLE job_state.job_ref (
	queue pg_catalog.text NOT NULL,
	job_id pg_catalog.int8 NOT NULL,
	kind pg_catalog.text NOT NULL
		CHECK (pg_catalog.length(kind) BETWEEN 1 AND 128),
	ref pg_catalog.text NOT NULL
		CHECK (pg_catalog.octet_length(ref) BETWEEN 1 AND 255),
	generation pg_catalog.int4 NOT NULL,
	added_at pg_catalog.timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
	PRIMARY KEY (queue, job_id, kind, ref)
);
COMMENT ON TABLE job_state.job_ref IS
	'references a worker attached to its job (add_ref): an agent session, an execution id elsewhere; append-only, they leave with their job';
CREATE INDEX job_ref_ref ON job_state.job_ref (kind, ref);
/* job_state.job_ref */
CREATE TRIGGER job_state_ref_append_only
	BEFORE UPDATE OR DELETE ON job_state.job_ref
	FOR EACH ROW EXECUTE FUNCTION job_state.append_only_trigger();
ALTER TABLE job_state.job_ref ENABLE ALWAYS TRIGGER job_state_ref_append_only;
CREATE TRIGGER job_state_ref_append_only_truncate
	BEFORE TRUNCATE ON job_state.job_ref
	FOR EACH STATEMENT EXECUTE FUNCTION job_state.append_only_trigger();
ALTER TABLE job_state.job_ref ENABLE ALWAYS TRIGGER job_state_ref_append_only_truncate;

/*
 * Operations an attempt began and did not perform (abandon_operation): the
 * state 'abandoned', which the next begin_operation starts again.
 */
ALTER TABLE job_state.operation DROP CONSTRAINT operation_state_check,
	ADD CONSTRAINT operation_state_check CHECK (state IN ('started', 'done', 'abandoned'));
COMMENT ON TABLE job_state.operation IS
	'external side effects of jobs, recorded before they happen (begin_operation), when done (finish_operation) or when the attempt that began one did not perform it (abandon_operation)';
CREATE FUNCTION job_state.abandon_operation(
	token job_state.claim_token,
	op_id pg_catalog.text)
	RETURNS void
	AS 'MODULE_PATHNAME', 'js_abandon_operation'
	LANGUAGE C VOLATILE PARALLEL UNSAFE
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION job_state.abandon_operation(job_state.claim_token, pg_catalog.text) IS
	'records that the attempt which began an operation did not perform it (it failed before the side effect); the next begin_operation answers new';
REVOKE ALL ON FUNCTION job_state.abandon_operation(job_state.claim_token, pg_catalog.text) FROM PUBLIC;

/*
 * References: what a worker attached to its job, and the jobs an operator
 * finds by one.
 */
CREATE FUNCTION job_state.add_ref(
	token job_state.claim_token,
	kind pg_catalog.text,
	ref pg_catalog.text)
	RETURNS pg_catalog.bool
	AS 'MODULE_PATHNAME', 'js_add_ref'
	LANGUAGE C VOLATILE PARALLEL UNSAFE
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION job_state.add_ref(job_state.claim_token, pg_catalog.text, pg_catalog.text) IS
	'attaches a reference (kind, ref) to the job of the current claim; true when added, false when the job had it already';

CREATE FUNCTION job_state.find_job(kind pg_catalog.text, ref pg_catalog.text)
	RETURNS TABLE(queue pg_catalog.text, job_id pg_catalog.int8,
		status job_state.status)
	AS 'MODULE_PATHNAME', 'js_find_job'
	LANGUAGE C STABLE PARALLEL SAFE
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION job_state.find_job(pg_catalog.text, pg_catalog.text) IS
	'the jobs, of the queues the current user may read, that a worker attached the reference (kind, ref) to';
REVOKE ALL ON job_state.job_ref FROM PUBLIC;
REVOKE ALL ON FUNCTION job_state.add_ref(job_state.claim_token, pg_catalog.text, pg_catalog.text) FROM PUBLIC;
REVOKE ALL ON FUNCTION job_state.find_job(pg_catalog.text, pg_catalog.text) FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('job_state.job_ref', '');

/*
 * Bulk calls: submit_many (a batch of jobs to one queue) and redrive_many
 * (the dead letters of a queue, optionally rate-limited).
 */
CREATE FUNCTION job_state.submit_many(
	queue pg_catalog.text,
	inputs pg_catalog.jsonb[],
	idempotency_keys pg_catalog.text[] DEFAULT NULL,
	run_afters pg_catalog.timestamptz[] DEFAULT NULL,
	priorities pg_catalog.int4[] DEFAULT NULL,
	max_attempts pg_catalog.int4[] DEFAULT NULL,
	deadlines pg_catalog.timestamptz[] DEFAULT NULL,
	budgets pg_catalog.jsonb[] DEFAULT NULL,
	resources pg_catalog.text[] DEFAULT NULL,
	concurrency_keys pg_catalog.text[] DEFAULT NULL)
	RETURNS TABLE(ord pg_catalog.int4, job_id pg_catalog.int8, outcome pg_catalog.text,
		status job_state.status)
	AS 'MODULE_PATHNAME', 'js_submit_many'
	LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 100
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION job_state.submit_many(pg_catalog.text, pg_catalog.jsonb[],
	pg_catalog.text[], pg_catalog.timestamptz[], pg_catalog.int4[], pg_catalog.int4[],
	pg_catalog.timestamptz[], pg_catalog.jsonb[], pg_catalog.text[], pg_catalog.text[]) IS
	'accepts up to 10000 jobs to one queue in one call, each as submit would; per row (ord, in input order) created, existing (same key and input) or conflict (same key, other input: nothing stored, the batch goes on)';
REVOKE ALL ON FUNCTION job_state.submit_many(pg_catalog.text, pg_catalog.jsonb[],
	pg_catalog.text[], pg_catalog.timestamptz[], pg_catalog.int4[], pg_catalog.int4[],
	pg_catalog.timestamptz[], pg_catalog.jsonb[], pg_catalog.text[], pg_catalog.text[]) FROM PUBLIC;

CREATE FUNCTION job_state.redrive_many(
	queue pg_catalog.text,
	reason pg_catalog.text DEFAULT NULL,
	max_jobs pg_catalog.int4 DEFAULT 1000,
	per_second pg_catalog.float8 DEFAULT NULL,
	extra_attempts pg_catalog.int4 DEFAULT 0,
	extra_budget pg_catalog.jsonb DEFAULT NULL,
	new_deadline pg_catalog.timestamptz DEFAULT NULL)
	RETURNS TABLE(job_id pg_catalog.int8, outcome pg_catalog.text,
		reason pg_catalog.text, run_after pg_catalog.timestamptz)
	AS 'MODULE_PATHNAME', 'js_redrive_many'
	LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 1000
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION job_state.redrive_many(pg_catalog.text, pg_catalog.text,
	pg_catalog.int4, pg_catalog.float8, pg_catalog.int4, pg_catalog.jsonb,
	pg_catalog.timestamptz) IS
	'redrives the failed and unknown jobs of a queue (only those of reason, if given), oldest first, at most max_jobs, skipping jobs other transactions hold; with per_second the k-th (from 0) runs after now + k / per_second; a job its limits still forbid is reported refused with its reason';
REVOKE ALL ON FUNCTION job_state.redrive_many(pg_catalog.text, pg_catalog.text,
	pg_catalog.int4, pg_catalog.float8, pg_catalog.int4, pg_catalog.jsonb,
	pg_catalog.timestamptz) FROM PUBLIC;

/*
 * A job without an idempotency key has no input hash (nothing compares
 * it), and the submit writes no history row: the job row records it.
 * Rows stored before keep what they have.
 */
ALTER TABLE job_state.job ALTER COLUMN input_hash DROP NOT NULL;
COMMENT ON COLUMN job_state.job.input_hash IS
	'SHA-256 of the input of a job with an idempotency key, computed by the job_state_fsm trigger (a key given again with other input is refused); NULL for a job without a key';
COMMENT ON TABLE job_state.job_event IS
	'append-only history of job state changes after the submit (the job row records the submit: accepted_at, submitted_by)';

/*
 * The job row holds its latest claim and the change that ended it
 * (event.c): the happy path writes no history row.  The stored history
 * becomes job_event_log (its rows, grants, triggers and index go with the
 * rename) and job_event the view of all of it.  Jobs stored before hold
 * nothing.  A grant of SELECT on the old table now reads job_event_log;
 * the view needs its own (README, Upgrading).
 */
ALTER TABLE job_state.job
	ADD COLUMN held_claim_seq pg_catalog.int8,
	ADD COLUMN held_end_seq pg_catalog.int8;
COMMENT ON COLUMN job_state.job.held_claim_seq IS
	'set by the job_state_fsm trigger only: the seq of the job''s latest claim (accepted -> running at started_at, by worker, in this generation) while the row holds that event in place of a job_event_log row';
COMMENT ON COLUMN job_state.job.held_end_seq IS
	'set by the job_state_fsm trigger only: the seq of the change that ended the held claim (running -> status at finished_at, with reason) while the row holds it';
ALTER TABLE job_state.job_event RENAME TO job_event_log;
COMMENT ON TABLE job_state.job_event_log IS
	'append-only stored history of job state changes after the submit; a job''s latest claim and the change that ended it are held by its job row until a later change (read both through job_state.job_event)';
COMMENT ON FUNCTION job_state.append_only_trigger() IS
	'keeps job_state.job_event_log append-only: rows leave only with their job, through purge';
CREATE VIEW job_state.job_event WITH (security_barrier) AS
	SELECT l.queue, l.job_id, l.seq, l.from_status, l.to_status,
		l.generation, l.at, l.detail
	  FROM job_state.job_event_log l
	UNION ALL
	SELECT j.queue, j.id, j.held_claim_seq, 'accepted'::job_state.status,
		'running'::job_state.status, j.generation, j.started_at,
		CASE WHEN j.worker IS NOT NULL
			THEN pg_catalog.jsonb_build_object('worker', j.worker) END
	  FROM job_state.job j
	 WHERE j.held_claim_seq IS NOT NULL
	UNION ALL
	SELECT j.queue, j.id, j.held_end_seq, 'running'::job_state.status,
		j.status, j.generation, j.finished_at,
		CASE WHEN j.reason IS NOT NULL
			THEN pg_catalog.jsonb_build_object('reason', j.reason) END
	  FROM job_state.job j
	 WHERE j.held_end_seq IS NOT NULL;
COMMENT ON VIEW job_state.job_event IS
	'history of job state changes after the submit (the job row records the submit: accepted_at, submitted_by): the rows of job_event_log and the latest claim and its end that job rows hold';
CREATE TRIGGER job_state_append_only
	INSTEAD OF INSERT OR UPDATE OR DELETE ON job_state.job_event
	FOR EACH ROW EXECUTE FUNCTION job_state.append_only_trigger();
REVOKE ALL ON job_state.job_event FROM PUBLIC;

/*
 * Tenant isolation.  A schedule belongs to the role that made it: its
 * ticks are submitted as that role (skipped while it no longer exists or
 * may not submit), and its name is unique within its queue, not over all
 * queues.  Schedules made at 0.1.0 belong to the owner of job_state's
 * tables.  unschedule takes the queue too.
 */
ALTER TABLE job_state.schedule ADD COLUMN owner pg_catalog.regrole;
UPDATE job_state.schedule
   SET owner = (SELECT c.relowner FROM pg_catalog.pg_class c
				 WHERE c.oid OPERATOR(pg_catalog.=) 'job_state.schedule'::pg_catalog.regclass)::pg_catalog.regrole;
ALTER TABLE job_state.schedule
	ALTER COLUMN owner SET NOT NULL,
	ALTER COLUMN owner SET DEFAULT pg_catalog.to_regrole(pg_catalog.quote_ident(CURRENT_USER)),
	DROP CONSTRAINT schedule_pkey,
	ADD CONSTRAINT schedule_pkey PRIMARY KEY (queue, name);
COMMENT ON COLUMN job_state.schedule.owner IS
	'the role that called schedule(): each tick is submitted as this role, and skipped while it no longer exists or may not submit to the queue';

DROP FUNCTION job_state.unschedule(pg_catalog.text);
CREATE FUNCTION job_state.unschedule(name pg_catalog.text,
	queue pg_catalog.text DEFAULT NULL)
	RETURNS void
	AS 'MODULE_PATHNAME', 'js_unschedule'
	LANGUAGE C VOLATILE PARALLEL UNSAFE
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION job_state.unschedule(pg_catalog.text, pg_catalog.text) IS
	'removes a schedule the caller owns or whose queue it may submit to (the jobs it submitted stay); without a queue, the one such schedule of that name';
REVOKE ALL ON FUNCTION job_state.unschedule(pg_catalog.text, pg_catalog.text) FROM PUBLIC;

/*
 * stale_refusals(queue_id) answers only for a queue the caller may read
 * (NULL otherwise, as for no such queue); it stays executable by PUBLIC
 * for queue_stats.
 */
CREATE OR REPLACE FUNCTION job_state.stale_refusals(queue_id pg_catalog.int4)
	RETURNS pg_catalog.int8
	AS 'MODULE_PATHNAME', 'js_stale_refusals'
	LANGUAGE C STABLE STRICT PARALLEL RESTRICTED
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION job_state.stale_refusals(pg_catalog.int4) IS
	'stale-token refusals counted for a queue number (survives the refused transactions'' rollback); NULL for no such queue and for a queue the caller may not read';

/*
 * Wake-ups on per-queue channels named by a secret (notify.c, waiter.c):
 * job_state_<channel> with an empty payload for new jobs and
 * job_state_done_<channel> with the job id for ended jobs, in place of
 * 0.1.0's job_state and job_state_done, which every role could LISTEN to.
 */
ALTER TABLE job_state.queue ADD COLUMN channel pg_catalog.text NOT NULL
	DEFAULT pg_catalog.replace(pg_catalog.gen_random_uuid()::pg_catalog.text, '-', '')
	CONSTRAINT queue_channel_valid
	CHECK (channel OPERATOR(pg_catalog.~) '^[0-9a-f]{32}$');
COMMENT ON COLUMN job_state.queue.channel IS
	'the secret part of the queue''s notification channels job_state_<channel> (new jobs) and job_state_done_<channel> (ended jobs); queue_channel() gives them to roles with the privilege';

CREATE FUNCTION job_state.queue_channel(queue pg_catalog.text,
	kind pg_catalog.text DEFAULT 'work')
	RETURNS pg_catalog.text
	AS 'MODULE_PATHNAME', 'js_queue_channel'
	LANGUAGE C STABLE STRICT PARALLEL RESTRICTED
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION job_state.queue_channel(pg_catalog.text, pg_catalog.text) IS
	'the channel to LISTEN to: work (a new job, empty payload; needs claim) or done (an ended job''s id; needs read or submit)';
REVOKE ALL ON FUNCTION job_state.queue_channel(pg_catalog.text, pg_catalog.text) FROM PUBLIC;

/*
 * Every new generation draws a claim nonce (the job_state_fsm trigger) that
 * its tokens carry: a token of a claim lost in a failover is refused on the
 * promoted server even where the generation is the same.  Jobs stored
 * before hold 0, the nonce tokens of the 0.1.0 library stand for: they
 * keep working until the job's next generation.
 */
ALTER TABLE job_state.job
	ADD COLUMN claim_nonce pg_catalog.int4 NOT NULL DEFAULT 0;
COMMENT ON COLUMN job_state.job.claim_nonce IS
	'set by the job_state_fsm trigger only: a random value drawn with each new generation, which the tokens of that generation carry and every use of them must match (a claim lost in a failover cannot be replayed); 0 until the first claim, and for claims made before 0.2.0';

/*
 * The WAL timelines jobs were written on (timeline.c): the first job write
 * on a new timeline (a promotion, a point-in-time recovery) advances
 * job_id_seq and job_event_seq by 2^32 and records the job ids it
 * skipped, so that no id handed out by a primary lost in a failover is
 * handed out again.
 */
CREATE FUNCTION job_state.wal_timeline()
	RETURNS pg_catalog.int8
	AS 'MODULE_PATHNAME', 'js_wal_timeline'
	LANGUAGE C STRICT VOLATILE;
COMMENT ON FUNCTION job_state.wal_timeline() IS
	'the WAL timeline this server writes on (a promotion starts a new one)';
REVOKE ALL ON FUNCTION job_state.wal_timeline() FROM PUBLIC;

CREATE TABLE job_state.timeline (
	timeline pg_catalog.int8 PRIMARY KEY,
	arrived_at pg_catalog.timestamptz NOT NULL,
	job_ids_after pg_catalog.int8 NOT NULL,
	job_ids_resume_at pg_catalog.int8 NOT NULL
);
COMMENT ON TABLE job_state.timeline IS
	'the WAL timelines jobs were written on: on the first job write of a new one (after a promotion), job and history ids jumped from job_ids_after to job_ids_resume_at; the ids between may have been handed out by the lost primary';
REVOKE ALL ON job_state.timeline FROM PUBLIC;
INSERT INTO job_state.timeline (timeline, arrived_at, job_ids_after, job_ids_resume_at)
	SELECT job_state.wal_timeline(), pg_catalog.now(), s.last_value, s.last_value
	  FROM job_state.job_id_seq s;

/* a queue's durability floor (durability.c) */
ALTER TABLE job_state.queue ADD COLUMN min_synchronous_commit pg_catalog.text
	CONSTRAINT queue_min_synchronous_commit_level
	CHECK (min_synchronous_commit IN ('local', 'remote_write', 'on', 'remote_apply'));
COMMENT ON COLUMN job_state.queue.min_synchronous_commit IS
	'the queue''s durability floor: submits to it and calls under claims of its jobs raise synchronous_commit to at least this level for the rest of their transaction; NULL: the session''s setting';
