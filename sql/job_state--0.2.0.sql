/* job_state 0.2.0: install script */

\echo Use "CREATE EXTENSION job_state" to load this file. \quit

/*
 * The whole schema of 0.2.0, in this order: the schema; types; tables;
 * trigger functions and triggers; the API by area; views; privileges;
 * the tables pg_dump keeps.  Databases made at an earlier version get the
 * same schema through the upgrade scripts (job_state--A--B.sql);
 * test/t/007_upgrade.pl compares the two.
 */

/*
 * ==== Schema ==============================================================
 * Created here (control file: schema = pg_catalog) so that it is a member
 * of the extension and DROP EXTENSION removes it too.
 */
CREATE SCHEMA job_state;
COMMENT ON SCHEMA job_state IS 'job_state: safe re-execution for asynchronous jobs';
REVOKE ALL ON SCHEMA job_state FROM PUBLIC;

/*
 * ==== Types ===============================================================
 * Job status and error class; claim_token, the fencing token (token.c),
 * with its I/O functions, accessors and equality operators.
 */
CREATE TYPE job_state.status AS ENUM
	('accepted', 'running', 'waiting', 'succeeded', 'failed', 'unknown', 'cancelled');
COMMENT ON TYPE job_state.status IS
	'lifecycle of a job: accepted -> running (-> waiting for a callback) -> succeeded | failed | unknown; see the README for every allowed transition';

CREATE TYPE job_state.error_class AS ENUM
	('transient', 'throttled', 'permanent', 'unknown');
COMMENT ON TYPE job_state.error_class IS
	'why an attempt failed: transient and throttled are retried, permanent ends the job, unknown means the outcome is not known';

CREATE TYPE job_state.claim_token;

CREATE FUNCTION job_state.claim_token_in(pg_catalog.cstring)
	RETURNS job_state.claim_token
	AS 'MODULE_PATHNAME', 'js_claim_token_in'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION job_state.claim_token_out(job_state.claim_token)
	RETURNS pg_catalog.cstring
	AS 'MODULE_PATHNAME', 'js_claim_token_out'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION job_state.claim_token_recv(pg_catalog.internal)
	RETURNS job_state.claim_token
	AS 'MODULE_PATHNAME', 'js_claim_token_recv'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION job_state.claim_token_send(job_state.claim_token)
	RETURNS pg_catalog.bytea
	AS 'MODULE_PATHNAME', 'js_claim_token_send'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE TYPE job_state.claim_token (
	INPUT = job_state.claim_token_in,
	OUTPUT = job_state.claim_token_out,
	RECEIVE = job_state.claim_token_recv,
	SEND = job_state.claim_token_send,
	INTERNALLENGTH = 32,
	ALIGNMENT = double,
	STORAGE = plain
);
COMMENT ON TYPE job_state.claim_token IS
	'fencing token of one claim: job id, generation, queue number and a MAC; opaque URL-safe text';

CREATE FUNCTION job_state.token_job(job_state.claim_token)
	RETURNS pg_catalog.int8
	AS 'MODULE_PATHNAME', 'js_token_job'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION job_state.token_job(job_state.claim_token) IS
	'job id carried by a claim token (the MAC is not checked here)';

CREATE FUNCTION job_state.token_generation(job_state.claim_token)
	RETURNS pg_catalog.int4
	AS 'MODULE_PATHNAME', 'js_token_generation'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION job_state.token_generation(job_state.claim_token) IS
	'generation carried by a claim token (the MAC is not checked here)';

CREATE FUNCTION job_state.claim_token_eq(job_state.claim_token, job_state.claim_token)
	RETURNS pg_catalog.bool
	AS 'MODULE_PATHNAME', 'js_claim_token_eq'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
COMMENT ON FUNCTION job_state.claim_token_eq(job_state.claim_token, job_state.claim_token) IS
	'equality of claim tokens';

CREATE FUNCTION job_state.claim_token_ne(job_state.claim_token, job_state.claim_token)
	RETURNS pg_catalog.bool
	AS 'MODULE_PATHNAME', 'js_claim_token_ne'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
COMMENT ON FUNCTION job_state.claim_token_ne(job_state.claim_token, job_state.claim_token) IS
	'inequality of claim tokens';

CREATE OPERATOR job_state.= (
	LEFTARG = job_state.claim_token,
	RIGHTARG = job_state.claim_token,
	FUNCTION = job_state.claim_token_eq,
	COMMUTATOR = OPERATOR(job_state.=),
	NEGATOR = OPERATOR(job_state.<>),
	RESTRICT = eqsel,
	JOIN = eqjoinsel
);
CREATE OPERATOR job_state.<> (
	LEFTARG = job_state.claim_token,
	RIGHTARG = job_state.claim_token,
	FUNCTION = job_state.claim_token_ne,
	COMMUTATOR = OPERATOR(job_state.<>),
	NEGATOR = OPERATOR(job_state.=),
	RESTRICT = neqsel,
	JOIN = neqjoinsel
);

/*
 * Functions the table definitions call: new_secret() makes the first MAC
 * key of job_state.secret, cron_next() checks schedule.cron.
 */
CREATE FUNCTION job_state.new_secret()
	RETURNS pg_catalog.bytea
	AS 'MODULE_PATHNAME', 'js_new_secret'
	LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION job_state.new_secret() IS
	'32 bytes from the strong random source, used once as the MAC key';

CREATE FUNCTION job_state.cron_next(cron pg_catalog.text,
	after pg_catalog.timestamptz)
	RETURNS pg_catalog.timestamptz
	AS 'MODULE_PATHNAME', 'js_cron_next'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION job_state.cron_next(pg_catalog.text, pg_catalog.timestamptz) IS
	'first tick of a 5-field cron expression (minute hour day-of-month month day-of-week, UTC) strictly after the given time; 22023 names the field of a bad expression';

/*
 * ==== Tables ==============================================================
 */

/*
 * MAC keys for claim tokens, readable only by the extension owner.  The
 * newest key signs new tokens and a token verifies under any of the eight
 * newest (token.c); a restored dump brings the keys back, so tokens stay
 * valid across it.  Made with one key; rotate_secret() adds the next.
 */
CREATE TABLE job_state.secret (
	created_at pg_catalog.timestamptz NOT NULL DEFAULT pg_catalog.now(),
	key pg_catalog.bytea NOT NULL CHECK (pg_catalog.length(key) >= 32)
);
COMMENT ON TABLE job_state.secret IS
	'per-database MAC keys for claim tokens: the newest signs, each of the eight newest verifies; change them with rotate_secret()';
INSERT INTO job_state.secret (key) VALUES (job_state.new_secret());

/*
 * Queues: small configuration table, one row per queue.  acl holds the
 * queue's privileges (acl.c): an aclitem[] checked with PostgreSQL's
 * aclmask, submit (INSERT, a), claim and act with its tokens (UPDATE, w),
 * operate (DELETE, d), read (SELECT, r); NULL when never granted on, open
 * to every role that may execute the functions.
 */
CREATE SEQUENCE job_state.queue_id_seq AS pg_catalog.int4;

CREATE TABLE job_state.queue (
	name pg_catalog.text PRIMARY KEY
		CHECK (pg_catalog.length(name) BETWEEN 1 AND 128),
	id pg_catalog.int4 NOT NULL UNIQUE
		DEFAULT pg_catalog.nextval('job_state.queue_id_seq'),
	lease pg_catalog.interval NOT NULL DEFAULT '5 min'
		CHECK (lease > '0'),
	max_lease pg_catalog.interval NOT NULL DEFAULT '12 hours'
		CHECK (max_lease > '0'),
	retry_interval pg_catalog.interval NOT NULL DEFAULT '2 s'
		CHECK (retry_interval >= '0'),
	backoff_rate pg_catalog.float8 NOT NULL DEFAULT 2.0
		CHECK (backoff_rate >= 1.0 AND backoff_rate <= 1000.0),
	max_retries pg_catalog.int4 NOT NULL DEFAULT 3
		CHECK (max_retries >= 0),
	max_delay pg_catalog.interval NOT NULL DEFAULT '30 s'
		CHECK (max_delay >= '0'),
	jitter pg_catalog.text NOT NULL DEFAULT 'full'
		CHECK (jitter IN ('full', 'none')),
	max_attempts pg_catalog.int4
		CHECK (max_attempts > 0),
	on_lease_expiry pg_catalog.text NOT NULL DEFAULT 'unknown'
		CHECK (on_lease_expiry IN ('unknown', 'retry')),
	concurrency_limit pg_catalog.int4
		CHECK (concurrency_limit > 0),
	per_key_limit pg_catalog.int4
		CHECK (per_key_limit > 0),
	paused pg_catalog.bool NOT NULL DEFAULT false,
	uses_resources pg_catalog.bool NOT NULL DEFAULT false,
	created_at pg_catalog.timestamptz NOT NULL DEFAULT pg_catalog.now(),
	acl pg_catalog.aclitem[]
		CONSTRAINT queue_acl_valid
		CHECK (acl IS NULL OR pg_catalog.cardinality(acl) OPERATOR(pg_catalog.=) 0
			   OR (pg_catalog.array_ndims(acl) OPERATOR(pg_catalog.=) 1
				   AND pg_catalog.array_position(acl, NULL) IS NULL)),
	retention pg_catalog.interval
		CONSTRAINT queue_retention_bounded
		CHECK (retention >= '1 s' AND retention <= '3600 days'),
	channel pg_catalog.text NOT NULL
		DEFAULT pg_catalog.replace(pg_catalog.gen_random_uuid()::pg_catalog.text, '-', '')
		CONSTRAINT queue_channel_valid
		CHECK (channel OPERATOR(pg_catalog.~) '^[0-9a-f]{32}$'),
	min_synchronous_commit pg_catalog.text
		CONSTRAINT queue_min_synchronous_commit_level
		CHECK (min_synchronous_commit IN ('local', 'remote_write', 'on', 'remote_apply')),
	/* spans added to timestamps: at most what create_queue allows */
	CONSTRAINT queue_spans_bounded
		CHECK (lease <= '3600 days' AND max_lease <= '3600 days'
			   AND retry_interval <= '3600 days' AND max_delay <= '3600 days')
);
COMMENT ON TABLE job_state.queue IS
	'one row per queue: lease, retry policy, limits; written by create_queue and alter_queue';
COMMENT ON COLUMN job_state.queue.acl IS
	'the queue''s privileges (a = submit, w = claim and act, d = operate, r = read); NULL: open to every role that may execute the functions';
COMMENT ON COLUMN job_state.queue.channel IS
	'the secret part of the queue''s notification channels job_state_<channel> (new jobs) and job_state_done_<channel> (ended jobs); queue_channel() gives them to roles with the privilege';
COMMENT ON COLUMN job_state.queue.retention IS
	'how long succeeded, failed and cancelled jobs are kept after they finished; sweep() and the sweeper delete older ones with all their rows; NULL: until purge()';
COMMENT ON COLUMN job_state.queue.min_synchronous_commit IS
	'the queue''s durability floor: submits to it and calls under claims of its jobs raise synchronous_commit to at least this level for the rest of their transaction; NULL: the session''s setting';

/*
 * Jobs.  The primary key leads with the queue (the distribution key should
 * the schema ever be spread out); ids come from one sequence.  Who
 * submitted a job is the role's OID (regrole), not its name: a rename
 * keeps a role's jobs, a role dropped and created again under the same
 * name does not inherit them.
 *
 * Column order is chosen for the WAL: when an UPDATE puts the new row
 * version on the same page, PostgreSQL logs only the bytes between the
 * longest common prefix and suffix of the old and new row.  So the columns
 * no transition changes (queue, id, submitter, key, input and its hash)
 * come first, those only an operator changes (limits) next, and the ones
 * every claim and completion writes last: a claim logs about the same
 * bytes whether the input is 50 bytes or 1,500.
 */
CREATE SEQUENCE job_state.job_id_seq AS pg_catalog.int8;

CREATE TABLE job_state.job (
	queue pg_catalog.text NOT NULL,
	id pg_catalog.int8 NOT NULL DEFAULT pg_catalog.nextval('job_state.job_id_seq'),
	submitted_by pg_catalog.regrole NOT NULL
		DEFAULT pg_catalog.to_regrole(pg_catalog.quote_ident(CURRENT_USER)),
	accepted_at pg_catalog.timestamptz NOT NULL DEFAULT pg_catalog.now(),
	priority pg_catalog.int4 NOT NULL DEFAULT 0,
	idempotency_key pg_catalog.text,
	input_hash pg_catalog.bytea,
	input pg_catalog.jsonb NOT NULL,
	resource pg_catalog.text,
	concurrency_key pg_catalog.text,
	max_attempts pg_catalog.int4,
	deadline pg_catalog.timestamptz,
	budget pg_catalog.jsonb,
	status job_state.status NOT NULL DEFAULT 'accepted',
	generation pg_catalog.int4 NOT NULL DEFAULT 0,
	attempts pg_catalog.int4 NOT NULL DEFAULT 0,
	retries pg_catalog.int4 NOT NULL DEFAULT 0,
	throttles pg_catalog.int4 NOT NULL DEFAULT 0,
	run_after pg_catalog.timestamptz NOT NULL DEFAULT pg_catalog.now(),
	cancel_requested pg_catalog.bool NOT NULL DEFAULT false,
	queue_slot pg_catalog.int4,
	resource_slot pg_catalog.int4,
	key_slot pg_catalog.int4,
	lease_expires_at pg_catalog.timestamptz,
	started_at pg_catalog.timestamptz,
	finished_at pg_catalog.timestamptz,
	worker pg_catalog.text,
	result pg_catalog.jsonb,
	last_error pg_catalog.jsonb,
	error_class job_state.error_class,
	reason pg_catalog.text,
	spent pg_catalog.jsonb NOT NULL DEFAULT '{}',
	callback_timeout_at pg_catalog.timestamptz,
	heartbeat_interval pg_catalog.interval,
	progress pg_catalog.jsonb,
	progress_generation pg_catalog.int4,
	progress_at pg_catalog.timestamptz,
	held_claim_seq pg_catalog.int8,
	held_end_seq pg_catalog.int8,
	claim_nonce pg_catalog.int4 NOT NULL DEFAULT 0,
	PRIMARY KEY (queue, id)
) WITH (fillfactor = 80,
		autovacuum_vacuum_scale_factor = 0.01,
		autovacuum_vacuum_insert_scale_factor = 0.01,
		autovacuum_analyze_scale_factor = 0.02,
		vacuum_truncate = false);
COMMENT ON TABLE job_state.job IS
	'one row per job; every write is checked by the job_state_fsm trigger (which also checks the key lengths and max_attempts, in place of CHECK constraints that would be parsed again for every statement)';
COMMENT ON COLUMN job_state.job.callback_timeout_at IS
	'while the job is waiting for a callback: when its outcome becomes unknown if no callback came (lease_expires_at is the waiting window, up to this); NULL otherwise';
COMMENT ON COLUMN job_state.job.heartbeat_interval IS
	'while the job is waiting for a callback: how long each heartbeat keeps the waiting window open (NULL: no heartbeat needed)';
COMMENT ON COLUMN job_state.job.input_hash IS
	'SHA-256 of the input of a job with an idempotency key, computed by the job_state_fsm trigger (a key given again with other input is refused); NULL for a job without a key';
COMMENT ON COLUMN job_state.job.submitted_by IS
	'the role that submitted the job (the caller of submit, following SET ROLE), by OID: follows renames; 0 once the role is dropped';
COMMENT ON COLUMN job_state.job.progress IS
	'the latest progress a heartbeat of the job reported (at most 64 kB); kept across attempts: progress_generation says which one';
COMMENT ON COLUMN job_state.job.progress_generation IS
	'the generation of the claim whose heartbeat reported progress';
COMMENT ON COLUMN job_state.job.progress_at IS
	'when progress was reported';
COMMENT ON COLUMN job_state.job.held_claim_seq IS
	'set by the job_state_fsm trigger only: the seq of the job''s latest claim (accepted -> running at started_at, by worker, in this generation) while the row holds that event in place of a job_event_log row';
COMMENT ON COLUMN job_state.job.held_end_seq IS
	'set by the job_state_fsm trigger only: the seq of the change that ended the held claim (running -> status at finished_at, with reason) while the row holds it';

COMMENT ON COLUMN job_state.job.claim_nonce IS
	'set by the job_state_fsm trigger only: a random value drawn with each new generation, which the tokens of that generation carry and every use of them must match (a claim lost in a failover cannot be replayed); 0 until the first claim, and for claims made before 0.2.0';

CREATE UNIQUE INDEX job_idempotency_key ON job_state.job (queue, idempotency_key)
	WHERE idempotency_key IS NOT NULL;
CREATE INDEX job_ready ON job_state.job (queue, priority DESC, run_after, id)
	WHERE status = 'accepted';
/* running and waiting jobs: the only ones with a lease (fsm.c) */
CREATE INDEX job_lease ON job_state.job (queue, lease_expires_at)
	WHERE lease_expires_at IS NOT NULL;
CREATE INDEX job_finished ON job_state.job (queue, finished_at)
	WHERE status IN ('succeeded', 'failed', 'cancelled', 'unknown');

/*
 * Every state change, written by the job_state_event trigger.
 */
CREATE SEQUENCE job_state.job_event_seq AS pg_catalog.int8;

/*
 * The NOT NULL constraints keep the names 0.1.0's table job_event gave
 * them (PostgreSQL 18 names them, and a rename of the table keeps them), so
 * that an install and an upgrade are the same schema on every major.
 */
CREATE TABLE job_state.job_event_log (
	queue pg_catalog.text CONSTRAINT job_event_queue_not_null NOT NULL,
	job_id pg_catalog.int8 CONSTRAINT job_event_job_id_not_null NOT NULL,
	seq pg_catalog.int8 CONSTRAINT job_event_seq_not_null NOT NULL
		DEFAULT pg_catalog.nextval('job_state.job_event_seq'),
	from_status job_state.status,
	to_status job_state.status CONSTRAINT job_event_to_status_not_null NOT NULL,
	generation pg_catalog.int4 CONSTRAINT job_event_generation_not_null NOT NULL,
	at pg_catalog.timestamptz CONSTRAINT job_event_at_not_null NOT NULL
		DEFAULT pg_catalog.clock_timestamp(),
	detail pg_catalog.jsonb
) WITH (autovacuum_vacuum_insert_scale_factor = 0.05,
		vacuum_truncate = false);
COMMENT ON TABLE job_state.job_event_log IS
	'append-only stored history of job state changes after the submit; a job''s latest claim and the change that ended it are held by its job row until a later change (read both through job_state.job_event)';
CREATE INDEX job_event_job ON job_state.job_event_log (queue, job_id);


/*
 * Spend as it happened: one row per charge, with the generation of the
 * token that reported it.
 */
CREATE TABLE job_state.spend (
	queue pg_catalog.text NOT NULL,
	job_id pg_catalog.int8 NOT NULL,
	generation pg_catalog.int4 NOT NULL,
	meter pg_catalog.text NOT NULL,
	amount pg_catalog.numeric NOT NULL CHECK (amount >= 0),
	at pg_catalog.timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp()
);
COMMENT ON TABLE job_state.spend IS
	'ledger of charge() calls; job.spent holds the running totals';
CREATE INDEX spend_job ON job_state.spend (queue, job_id);

/*
 * References a worker attached to its job (ref.c).
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

/*
 * Limits shared by all claimers: resources (a model's quota across queues)
 * and the slot rows that count running jobs per queue, resource and key.
 */
CREATE TABLE job_state.resource (
	name pg_catalog.text PRIMARY KEY
		CHECK (pg_catalog.length(name) BETWEEN 1 AND 128),
	concurrency_limit pg_catalog.int4 CHECK (concurrency_limit > 0),
	max_starts_per_second pg_catalog.float8 CHECK (max_starts_per_second > 0),
	created_at pg_catalog.timestamptz NOT NULL DEFAULT pg_catalog.now()
);
COMMENT ON TABLE job_state.resource IS
	'limits shared by every queue whose jobs name the resource: running jobs (slots) and starts per second (bucket)';

/*
 * A resource's max_starts_per_second as the shards of a token bucket
 * (bucket.c), so that claimers in open transactions take tokens from
 * different rows: the burst of one second's worth of whole starts (at
 * least 1) is dealt out among up to 32 shards, each refilling at its share
 * of the rate.  Made again by the resource's trigger whenever the rate
 * changes.  Only the primary key is indexed: taking a token is a HOT
 * update.
 */
CREATE TABLE job_state.bucket (
	resource pg_catalog.text NOT NULL,
	n pg_catalog.int4 NOT NULL,
	per_second pg_catalog.float8 NOT NULL,
	burst pg_catalog.int4 NOT NULL,
	tokens pg_catalog.float8 NOT NULL,
	refilled_at pg_catalog.timestamptz NOT NULL,
	PRIMARY KEY (resource, n)
) WITH (fillfactor = 50);
COMMENT ON TABLE job_state.bucket IS
	'the start rate of a resource as token-bucket shards (n from 1 to their number): each refills at per_second and holds at most burst tokens; tokens as of refilled_at';

/*
 * kind is 'queue', 'resource' or 'key', and n runs from 1 to the limit.
 * These are not CHECK constraints: every claim and completion of a limited
 * queue writes slot rows, and the executor parses a table's CHECK
 * expressions again for each such write.  Claim reads only the slots of
 * the kind it asks for numbered 1 to the limit, so a row of another kind
 * or number is never taken as a slot.
 *
 * Only the primary key is indexed: taking and freeing a slot changes
 * job_id and queue alone, so both are HOT updates that add no index entry
 * for the next claimer to walk past.  A running job records the numbers of
 * the slots it holds (job.queue_slot, resource_slot, key_slot), and they
 * are freed by primary key.
 */
CREATE TABLE job_state.slot (
	kind pg_catalog.text NOT NULL,
	scope pg_catalog.text NOT NULL,
	key pg_catalog.text NOT NULL DEFAULT '',
	n pg_catalog.int4 NOT NULL,
	queue pg_catalog.text,
	job_id pg_catalog.int8,
	PRIMARY KEY (kind, scope, key, n)
) WITH (fillfactor = 50);
COMMENT ON TABLE job_state.slot IS
	'one row per unit of a concurrency limit (kind queue, resource or key; n from 1 to the limit); job_id is the running job holding it';

/*
 * Side effects: one row per external operation of a job.
 */
CREATE TABLE job_state.operation (
	queue pg_catalog.text NOT NULL,
	job_id pg_catalog.int8 NOT NULL,
	op_id pg_catalog.text NOT NULL
		CHECK (pg_catalog.octet_length(op_id) BETWEEN 1 AND 255),
	state pg_catalog.text NOT NULL DEFAULT 'started'
		CHECK (state IN ('started', 'done', 'abandoned')),
	generation pg_catalog.int4 NOT NULL,
	result pg_catalog.jsonb,
	started_at pg_catalog.timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
	finished_at pg_catalog.timestamptz,
	PRIMARY KEY (queue, job_id, op_id)
);
COMMENT ON TABLE job_state.operation IS
	'external side effects of jobs, recorded before they happen (begin_operation), when done (finish_operation) or when the attempt that began one did not perform it (abandon_operation)';

/*
 * Schedules (schedule.c, cron.c): periodic submits, driven by sweep() and
 * the background worker.  Cron expressions have 5 fields in UTC; each tick
 * is submitted with the idempotency key name@YYYY-MM-DDTHH:MIZ, so no tick
 * is ever doubled.
 */
CREATE TABLE job_state.schedule (
	name pg_catalog.text NOT NULL
		CHECK (pg_catalog.length(name) BETWEEN 1 AND 128
			   AND pg_catalog.octet_length(name) <= 237),
	cron pg_catalog.text NOT NULL
		CONSTRAINT schedule_cron_valid
		CHECK (job_state.cron_next(cron, '2000-01-01 00:00:00+00') IS NOT NULL),
	queue pg_catalog.text NOT NULL
		CHECK (pg_catalog.length(queue) BETWEEN 1 AND 128),
	input pg_catalog.jsonb NOT NULL,
	last_tick pg_catalog.timestamptz,
	created_at pg_catalog.timestamptz NOT NULL DEFAULT pg_catalog.now(),
	owner pg_catalog.regrole NOT NULL
		DEFAULT pg_catalog.to_regrole(pg_catalog.quote_ident(CURRENT_USER)),
	CONSTRAINT schedule_pkey PRIMARY KEY (queue, name)
);
COMMENT ON TABLE job_state.schedule IS
	'one row per schedule: cron expression (UTC), queue and input of its jobs, and the last tick submitted; written by schedule, unschedule and sweep';
COMMENT ON COLUMN job_state.schedule.owner IS
	'the role that called schedule(): each tick is submitted as this role, and skipped while it no longer exists or may not submit to the queue';
COMMENT ON COLUMN job_state.schedule.last_tick IS
	'the latest tick submitted; NULL until the first (a tick counts from created_at truncated to the minute)';

/*
 * ==== Trigger functions and triggers =====================================
 * The state machine, the history, the slot bookkeeping and the guards on
 * queues, resources, operations and the MAC keys are C triggers.  Each is
 * ENABLE ALWAYS: it fires whatever session_replication_role says, so a
 * session that may set it to replica (a superuser, a role granted SET on
 * it) cannot step past them, and a logical replication subscriber of these
 * tables runs them on every applied row.
 */
CREATE FUNCTION job_state.job_fsm_trigger()
	RETURNS trigger
	AS 'MODULE_PATHNAME', 'js_job_fsm_trigger'
	LANGUAGE C;
COMMENT ON FUNCTION job_state.job_fsm_trigger() IS
	'enforces the state machine and the forward-only counters on job_state.job';

CREATE FUNCTION job_state.job_event_trigger()
	RETURNS trigger
	AS 'MODULE_PATHNAME', 'js_job_event_trigger'
	LANGUAGE C;
COMMENT ON FUNCTION job_state.job_event_trigger() IS
	'records every state change of job_state.job in job_state.job_event and frees the concurrency slots of a job that left running';

CREATE FUNCTION job_state.job_truncate_trigger()
	RETURNS trigger
	AS 'MODULE_PATHNAME', 'js_job_truncate_trigger'
	LANGUAGE C;
COMMENT ON FUNCTION job_state.job_truncate_trigger() IS
	'refuses TRUNCATE of job_state.job while it holds live jobs';

CREATE FUNCTION job_state.append_only_trigger()
	RETURNS trigger
	AS 'MODULE_PATHNAME', 'js_append_only_trigger'
	LANGUAGE C;
COMMENT ON FUNCTION job_state.append_only_trigger() IS
	'keeps job_state.job_event_log append-only: rows leave only with their job, through purge';

CREATE FUNCTION job_state.queue_trigger()
	RETURNS trigger
	AS 'MODULE_PATHNAME', 'js_queue_trigger'
	LANGUAGE C;
COMMENT ON FUNCTION job_state.queue_trigger() IS
	'keeps a queue with jobs from being deleted or truncated away and every queue''s name and id from changing; creates the slots of a queue''s limits';

CREATE FUNCTION job_state.resource_trigger()
	RETURNS trigger
	AS 'MODULE_PATHNAME', 'js_resource_trigger'
	LANGUAGE C;
COMMENT ON FUNCTION job_state.resource_trigger() IS
	'keeps a resource that jobs name from being deleted or truncated away and every resource''s name from changing; creates the slots of a resource''s limit and the token-bucket shards of its start rate';

CREATE FUNCTION job_state.operation_trigger()
	RETURNS trigger
	AS 'MODULE_PATHNAME', 'js_operation_trigger'
	LANGUAGE C;
COMMENT ON FUNCTION job_state.operation_trigger() IS
	'keeps finished operations immutable; operations leave only with their job';

CREATE FUNCTION job_state.secret_trigger()
	RETURNS trigger
	AS 'MODULE_PATHNAME', 'js_secret_trigger'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION job_state.secret_trigger() IS
	'after any change to job_state.secret: every backend drops its cached MAC keys at commit';

/* job_state.queue */
CREATE TRIGGER job_state_queue
	BEFORE UPDATE OR DELETE ON job_state.queue
	FOR EACH ROW EXECUTE FUNCTION job_state.queue_trigger();
ALTER TABLE job_state.queue ENABLE ALWAYS TRIGGER job_state_queue;
CREATE TRIGGER job_state_queue_slots
	AFTER INSERT OR UPDATE OF concurrency_limit, per_key_limit ON job_state.queue
	FOR EACH ROW EXECUTE FUNCTION job_state.queue_trigger();
ALTER TABLE job_state.queue ENABLE ALWAYS TRIGGER job_state_queue_slots;
CREATE TRIGGER job_state_queue_truncate
	BEFORE TRUNCATE ON job_state.queue
	FOR EACH STATEMENT EXECUTE FUNCTION job_state.queue_trigger();
ALTER TABLE job_state.queue ENABLE ALWAYS TRIGGER job_state_queue_truncate;

/* job_state.job */
CREATE TRIGGER job_state_fsm
	BEFORE INSERT OR UPDATE OR DELETE ON job_state.job
	FOR EACH ROW EXECUTE FUNCTION job_state.job_fsm_trigger();
ALTER TABLE job_state.job ENABLE ALWAYS TRIGGER job_state_fsm;
CREATE TRIGGER job_state_event
	AFTER INSERT OR UPDATE ON job_state.job
	FOR EACH ROW EXECUTE FUNCTION job_state.job_event_trigger();
ALTER TABLE job_state.job ENABLE ALWAYS TRIGGER job_state_event;
CREATE TRIGGER job_state_truncate
	BEFORE TRUNCATE ON job_state.job
	FOR EACH STATEMENT EXECUTE FUNCTION job_state.job_truncate_trigger();
ALTER TABLE job_state.job ENABLE ALWAYS TRIGGER job_state_truncate;

/* job_state.job_event_log */
CREATE TRIGGER job_state_append_only
	BEFORE UPDATE OR DELETE ON job_state.job_event_log
	FOR EACH ROW EXECUTE FUNCTION job_state.append_only_trigger();
ALTER TABLE job_state.job_event_log ENABLE ALWAYS TRIGGER job_state_append_only;
CREATE TRIGGER job_state_append_only_truncate
	BEFORE TRUNCATE ON job_state.job_event_log
	FOR EACH STATEMENT EXECUTE FUNCTION job_state.append_only_trigger();
ALTER TABLE job_state.job_event_log ENABLE ALWAYS TRIGGER job_state_append_only_truncate;

/* job_state.job_ref */
CREATE TRIGGER job_state_ref_append_only
	BEFORE UPDATE OR DELETE ON job_state.job_ref
	FOR EACH ROW EXECUTE FUNCTION job_state.append_only_trigger();
ALTER TABLE job_state.job_ref ENABLE ALWAYS TRIGGER job_state_ref_append_only;
CREATE TRIGGER job_state_ref_append_only_truncate
	BEFORE TRUNCATE ON job_state.job_ref
	FOR EACH STATEMENT EXECUTE FUNCTION job_state.append_only_trigger();
ALTER TABLE job_state.job_ref ENABLE ALWAYS TRIGGER job_state_ref_append_only_truncate;

/* job_state.spend */
CREATE TRIGGER job_state_spend_append_only
	BEFORE UPDATE OR DELETE ON job_state.spend
	FOR EACH ROW EXECUTE FUNCTION job_state.append_only_trigger();
ALTER TABLE job_state.spend ENABLE ALWAYS TRIGGER job_state_spend_append_only;
CREATE TRIGGER job_state_spend_append_only_truncate
	BEFORE TRUNCATE ON job_state.spend
	FOR EACH STATEMENT EXECUTE FUNCTION job_state.append_only_trigger();
ALTER TABLE job_state.spend ENABLE ALWAYS TRIGGER job_state_spend_append_only_truncate;

/* job_state.resource */
CREATE TRIGGER job_state_resource
	BEFORE UPDATE OF name OR DELETE ON job_state.resource
	FOR EACH ROW EXECUTE FUNCTION job_state.resource_trigger();
ALTER TABLE job_state.resource ENABLE ALWAYS TRIGGER job_state_resource;
CREATE TRIGGER job_state_resource_limits
	AFTER INSERT OR UPDATE OF concurrency_limit, max_starts_per_second ON job_state.resource
	FOR EACH ROW EXECUTE FUNCTION job_state.resource_trigger();
ALTER TABLE job_state.resource ENABLE ALWAYS TRIGGER job_state_resource_limits;
CREATE TRIGGER job_state_resource_truncate
	BEFORE TRUNCATE ON job_state.resource
	FOR EACH STATEMENT EXECUTE FUNCTION job_state.resource_trigger();
ALTER TABLE job_state.resource ENABLE ALWAYS TRIGGER job_state_resource_truncate;

/* job_state.operation */
CREATE TRIGGER job_state_operation
	BEFORE UPDATE OR DELETE ON job_state.operation
	FOR EACH ROW EXECUTE FUNCTION job_state.operation_trigger();
ALTER TABLE job_state.operation ENABLE ALWAYS TRIGGER job_state_operation;
CREATE TRIGGER job_state_operation_truncate
	BEFORE TRUNCATE ON job_state.operation
	FOR EACH STATEMENT EXECUTE FUNCTION job_state.append_only_trigger();
ALTER TABLE job_state.operation ENABLE ALWAYS TRIGGER job_state_operation_truncate;

/*
 * job_state.secret: every statement that changes the keys, raw SQL
 * included, sends a relcache invalidation at commit, so every backend
 * drops its cached keys before its next transaction.
 */
CREATE TRIGGER job_state_secret_changed
	AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON job_state.secret
	FOR EACH STATEMENT EXECUTE FUNCTION job_state.secret_trigger();
ALTER TABLE job_state.secret ENABLE ALWAYS TRIGGER job_state_secret_changed;

/*
 * The drop guard (drop_guard.c): DROP EXTENSION job_state (or DROP OWNED
 * BY its owner) is refused while jobs that are not finished exist, unless
 * job_state.drop_live_jobs is on in the dropping session.  An event
 * trigger, so it works without shared_preload_libraries; a member of the
 * extension, so it goes with it; SECURITY DEFINER, so that it can count
 * the jobs whoever drops.
 */
CREATE FUNCTION job_state.drop_guard()
	RETURNS event_trigger
	AS 'MODULE_PATHNAME', 'js_drop_guard'
	LANGUAGE C VOLATILE PARALLEL UNSAFE
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION job_state.drop_guard() IS
	'event trigger: refuses DROP EXTENSION job_state while accepted, running or unknown jobs exist, unless job_state.drop_live_jobs is on';

CREATE EVENT TRIGGER job_state_drop_guard
	ON ddl_command_start
	WHEN TAG IN ('DROP EXTENSION', 'DROP OWNED')
	EXECUTE FUNCTION job_state.drop_guard();
COMMENT ON EVENT TRIGGER job_state_drop_guard IS
	'refuses to drop the extension while jobs that are not finished exist (SET job_state.drop_live_jobs = on to drop them on purpose)';
/* session_replication_role = replica must not switch the guard off */
ALTER EVENT TRIGGER job_state_drop_guard ENABLE ALWAYS;

/*
 * ==== API =================================================================
 */

/*
 * Helpers used inside our own statements: the retry policy's wait and the
 * budget check.
 */
CREATE FUNCTION job_state.retry_delay(retry_interval pg_catalog.interval,
	backoff_rate pg_catalog.float8, max_delay pg_catalog.interval,
	jitter pg_catalog.text, retry pg_catalog.int4)
	RETURNS pg_catalog.interval
	AS 'MODULE_PATHNAME', 'js_retry_delay'
	LANGUAGE C VOLATILE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION job_state.retry_delay(pg_catalog.interval, pg_catalog.float8,
	pg_catalog.interval, pg_catalog.text, pg_catalog.int4) IS
	'wait before the given retry (1 = first): min(retry_interval * backoff_rate^(retry-1), max_delay), drawn uniformly from [0, that] with full jitter';

CREATE FUNCTION job_state.budget_exhausted(budget pg_catalog.jsonb,
	spent pg_catalog.jsonb)
	RETURNS pg_catalog.bool
	AS 'MODULE_PATHNAME', 'js_budget_exhausted'
	LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION job_state.budget_exhausted(pg_catalog.jsonb, pg_catalog.jsonb) IS
	'true when some meter of budget has a spent amount at or above its limit';

/*
 * Queues
 */
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

CREATE FUNCTION job_state.pause_queue(name pg_catalog.text)
	RETURNS void
	AS 'MODULE_PATHNAME', 'js_pause_queue'
	LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION job_state.pause_queue(pg_catalog.text) IS
	'stops claims from the queue (submits are still accepted)';

CREATE FUNCTION job_state.resume_queue(name pg_catalog.text)
	RETURNS void
	AS 'MODULE_PATHNAME', 'js_resume_queue'
	LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION job_state.resume_queue(pg_catalog.text) IS
	'lets claims take jobs from a paused queue again';

/*
 * Resources: limits shared by all claimers, across queues.
 */
CREATE FUNCTION job_state.create_resource(
	name pg_catalog.text,
	concurrency_limit pg_catalog.int4 DEFAULT NULL,
	max_starts_per_second pg_catalog.float8 DEFAULT NULL)
	RETURNS void
	AS 'MODULE_PATHNAME', 'js_create_resource'
	LANGUAGE C VOLATILE PARALLEL UNSAFE
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION job_state.create_resource(pg_catalog.text, pg_catalog.int4, pg_catalog.float8) IS
	'a limit shared by all queues whose jobs name it: at most concurrency_limit running (NULL: no limit), at most max_starts_per_second starts (NULL: no rate); at least one of the two';

CREATE FUNCTION job_state.alter_resource(
	name pg_catalog.text,
	concurrency_limit pg_catalog.int4 DEFAULT NULL,
	max_starts_per_second pg_catalog.float8 DEFAULT NULL)
	RETURNS void
	AS 'MODULE_PATHNAME', 'js_alter_resource'
	LANGUAGE C VOLATILE PARALLEL UNSAFE
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION job_state.alter_resource(pg_catalog.text, pg_catalog.int4, pg_catalog.float8) IS
	'changes the limits it is given (a NULL argument keeps the current value)';

/*
 * Per-queue privileges (acl.c): grant_queue and revoke_queue are for the
 * owner (nothing is granted to PUBLIC); has_queue_privilege is for
 * everyone.
 */
CREATE FUNCTION job_state.grant_queue(queue pg_catalog.text,
	grantee pg_catalog.text, VARIADIC privileges pg_catalog.text[])
	RETURNS void
	AS 'MODULE_PATHNAME', 'js_grant_queue'
	LANGUAGE C VOLATILE PARALLEL UNSAFE
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION job_state.grant_queue(pg_catalog.text, pg_catalog.text, pg_catalog.text[]) IS
	'grants privileges on a queue (submit, claim, operate, read, all) to a role or to public; the first grant or revoke on a queue replaces "open to all" by PUBLIC and the owner holding every privilege';

CREATE FUNCTION job_state.revoke_queue(queue pg_catalog.text,
	grantee pg_catalog.text, VARIADIC privileges pg_catalog.text[])
	RETURNS void
	AS 'MODULE_PATHNAME', 'js_revoke_queue'
	LANGUAGE C VOLATILE PARALLEL UNSAFE
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION job_state.revoke_queue(pg_catalog.text, pg_catalog.text, pg_catalog.text[]) IS
	'revokes privileges on a queue (submit, claim, operate, read, all) from a role or from public; reaches every backend when it commits';

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

/*
 * Jobs: submit, claim, heartbeat and completion.
 */
CREATE FUNCTION job_state.submit(
	queue pg_catalog.text,
	input pg_catalog.jsonb,
	idempotency_key pg_catalog.text DEFAULT NULL,
	run_after pg_catalog.timestamptz DEFAULT NULL,
	priority pg_catalog.int4 DEFAULT 0,
	max_attempts pg_catalog.int4 DEFAULT NULL,
	deadline pg_catalog.timestamptz DEFAULT NULL,
	budget pg_catalog.jsonb DEFAULT NULL,
	resource pg_catalog.text DEFAULT NULL,
	concurrency_key pg_catalog.text DEFAULT NULL)
	RETURNS TABLE(job_id pg_catalog.int8, created pg_catalog.bool,
		status job_state.status)
	AS 'MODULE_PATHNAME', 'js_submit'
	LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 1
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION job_state.submit(pg_catalog.text, pg_catalog.jsonb,
	pg_catalog.text, pg_catalog.timestamptz, pg_catalog.int4, pg_catalog.int4,
	pg_catalog.timestamptz, pg_catalog.jsonb, pg_catalog.text, pg_catalog.text) IS
	'accepts a job; the same idempotency key with the same input returns the existing job, with another input fails with JS002';

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

CREATE FUNCTION job_state.claim(
	queue pg_catalog.text,
	worker pg_catalog.text,
	lease pg_catalog.interval DEFAULT NULL,
	max_jobs pg_catalog.int4 DEFAULT 1)
	RETURNS TABLE(token job_state.claim_token, job_id pg_catalog.int8,
		attempt pg_catalog.int4, input pg_catalog.jsonb,
		deadline pg_catalog.timestamptz)
	AS 'MODULE_PATHNAME', 'js_claim'
	LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 1
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION job_state.claim(pg_catalog.text, pg_catalog.text,
	pg_catalog.interval, pg_catalog.int4) IS
	'takes up to max_jobs ready jobs without waiting on rows other claimers hold; each comes with a fencing token';

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

CREATE FUNCTION job_state.assert_claim(token job_state.claim_token)
	RETURNS void
	AS 'MODULE_PATHNAME', 'js_assert_claim'
	LANGUAGE C VOLATILE PARALLEL UNSAFE
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION job_state.assert_claim(job_state.claim_token) IS
	'fails with JS001 unless the token is the current claim, and holds the job row until the transaction ends so no re-claim can commit meanwhile';

CREATE FUNCTION job_state.succeed(
	token job_state.claim_token,
	result pg_catalog.jsonb DEFAULT NULL)
	RETURNS void
	AS 'MODULE_PATHNAME', 'js_succeed'
	LANGUAGE C VOLATILE PARALLEL UNSAFE
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION job_state.succeed(job_state.claim_token, pg_catalog.jsonb) IS
	'completes the claimed job with its result; a token of an older generation fails with JS001';

CREATE FUNCTION job_state.succeed_many(
	tokens job_state.claim_token[],
	results pg_catalog.jsonb[] DEFAULT NULL)
	RETURNS TABLE(token job_state.claim_token, outcome pg_catalog.text)
	AS 'MODULE_PATHNAME', 'js_succeed_many'
	LANGUAGE C VOLATILE PARALLEL UNSAFE
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION job_state.succeed_many(job_state.claim_token[], pg_catalog.jsonb[]) IS
	'completes a batch in one statement; each token is fenced on its own and reported as succeeded or stale';

CREATE FUNCTION job_state.fail(
	token job_state.claim_token,
	class job_state.error_class,
	error pg_catalog.jsonb DEFAULT NULL,
	retry_after pg_catalog.interval DEFAULT NULL)
	RETURNS job_state.status
	AS 'MODULE_PATHNAME', 'js_fail'
	LANGUAGE C VOLATILE PARALLEL UNSAFE
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION job_state.fail(job_state.claim_token, job_state.error_class,
	pg_catalog.jsonb, pg_catalog.interval) IS
	'ends an attempt: transient/throttled retry by the queue policy while limits allow, permanent fails, unknown goes to reconciliation';

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

CREATE FUNCTION job_state.reconcile(
	job_id pg_catalog.int8,
	outcome job_state.status,
	detail pg_catalog.jsonb DEFAULT NULL)
	RETURNS void
	AS 'MODULE_PATHNAME', 'js_reconcile'
	LANGUAGE C VOLATILE PARALLEL UNSAFE
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION job_state.reconcile(pg_catalog.int8, job_state.status, pg_catalog.jsonb) IS
	'resolves an unknown job to succeeded, failed or accepted (run again)';

CREATE FUNCTION job_state.redrive(
	job_id pg_catalog.int8,
	extra_attempts pg_catalog.int4 DEFAULT 0,
	extra_budget pg_catalog.jsonb DEFAULT NULL,
	new_deadline pg_catalog.timestamptz DEFAULT NULL)
	RETURNS void
	AS 'MODULE_PATHNAME', 'js_redrive'
	LANGUAGE C VOLATILE PARALLEL UNSAFE
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION job_state.redrive(pg_catalog.int8, pg_catalog.int4,
	pg_catalog.jsonb, pg_catalog.timestamptz) IS
	'runs a failed, unknown or cancelled job again; attempts, deadline and spend carry over, limits rise only by what is passed; old tokens die';

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

CREATE FUNCTION job_state.cancel(
	job_id pg_catalog.int8,
	reason pg_catalog.text DEFAULT NULL)
	RETURNS pg_catalog.bool
	AS 'MODULE_PATHNAME', 'js_cancel'
	LANGUAGE C VOLATILE PARALLEL UNSAFE
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION job_state.cancel(pg_catalog.int8, pg_catalog.text) IS
	'cancels an accepted or unknown job now, or asks a running one to stop; false for succeeded or failed jobs';

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

/*
 * Operations: the external side effects of a job.
 */
CREATE FUNCTION job_state.begin_operation(
	token job_state.claim_token,
	op_id pg_catalog.text)
	RETURNS TABLE(state pg_catalog.text, result pg_catalog.jsonb)
	AS 'MODULE_PATHNAME', 'js_begin_operation'
	LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 1
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION job_state.begin_operation(job_state.claim_token, pg_catalog.text) IS
	'before a side effect: new (go ahead), done (here is its result) or in_doubt (check the external system with op_id)';

CREATE FUNCTION job_state.finish_operation(
	token job_state.claim_token,
	op_id pg_catalog.text,
	result pg_catalog.jsonb DEFAULT NULL)
	RETURNS void
	AS 'MODULE_PATHNAME', 'js_finish_operation'
	LANGUAGE C VOLATILE PARALLEL UNSAFE
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION job_state.finish_operation(job_state.claim_token, pg_catalog.text, pg_catalog.jsonb) IS
	'records that a side effect is done, with its result; later attempts get it back from begin_operation';

CREATE FUNCTION job_state.abandon_operation(
	token job_state.claim_token,
	op_id pg_catalog.text)
	RETURNS void
	AS 'MODULE_PATHNAME', 'js_abandon_operation'
	LANGUAGE C VOLATILE PARALLEL UNSAFE
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION job_state.abandon_operation(job_state.claim_token, pg_catalog.text) IS
	'records that the attempt which began an operation did not perform it (it failed before the side effect); the next begin_operation answers new';

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

/*
 * Budgets: spend against a job's meters.
 */
CREATE FUNCTION job_state.charge(
	token job_state.claim_token,
	meter pg_catalog.text,
	amount pg_catalog.numeric)
	RETURNS pg_catalog.numeric
	AS 'MODULE_PATHNAME', 'js_charge'
	LANGUAGE C VOLATILE PARALLEL UNSAFE
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION job_state.charge(job_state.claim_token, pg_catalog.text, pg_catalog.numeric) IS
	'records spend that happened (never refused, also from a stale token) and returns what is left of the meter';

CREATE FUNCTION job_state.reserve(
	token job_state.claim_token,
	meter pg_catalog.text,
	amount pg_catalog.numeric)
	RETURNS pg_catalog.numeric
	AS 'MODULE_PATHNAME', 'js_reserve'
	LANGUAGE C VOLATILE PARALLEL UNSAFE
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION job_state.reserve(job_state.claim_token, pg_catalog.text, pg_catalog.numeric) IS
	'checks that a planned spend fits the meter (JS004 if not) and returns what would be left; holds nothing';

/*
 * Maintenance: purge and lease expiry.
 */
CREATE FUNCTION job_state.purge(older_than pg_catalog.interval)
	RETURNS pg_catalog.int8
	AS 'MODULE_PATHNAME', 'js_purge'
	LANGUAGE C VOLATILE PARALLEL UNSAFE
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION job_state.purge(pg_catalog.interval) IS
	'deletes succeeded, failed and cancelled jobs that finished more than older_than ago, with their history';

CREATE FUNCTION job_state.sweep()
	RETURNS pg_catalog.int4
	AS 'MODULE_PATHNAME', 'js_sweep'
	LANGUAGE C VOLATILE PARALLEL UNSAFE
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION job_state.sweep() IS
	'applies lease expiry in every queue, submits due schedule ticks and deletes one batch (at most 1000 jobs) of finished jobs past their queue''s retention now; returns how many jobs lease expiry moved plus how many retention deleted';

/*
 * MAC keys: the newest key of job_state.secret signs new tokens and a
 * token verifies under any of the eight newest (token.c), so
 * rotate_secret() keeps the tokens in flight valid for one rotation and
 * refuses those of every retired key.
 */
CREATE FUNCTION job_state.rotate_secret(keep_previous pg_catalog.bool DEFAULT true)
	RETURNS pg_catalog.int4
	AS 'MODULE_PATHNAME', 'js_rotate_secret'
	LANGUAGE C VOLATILE PARALLEL UNSAFE
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION job_state.rotate_secret(pg_catalog.bool) IS
	'a new MAC key signs tokens from the commit on; the previous key still verifies unless keep_previous is false, older keys are retired (their tokens get JS007); returns how many keys were retired';

/*
 * Schedules (schedule.c, cron.c)
 */
CREATE FUNCTION job_state.cron_prev(cron pg_catalog.text,
	at pg_catalog.timestamptz)
	RETURNS pg_catalog.timestamptz
	AS 'MODULE_PATHNAME', 'js_cron_prev'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION job_state.cron_prev(pg_catalog.text, pg_catalog.timestamptz) IS
	'latest tick of a 5-field cron expression (UTC) at or before the given time';

CREATE FUNCTION job_state.schedule(
	name pg_catalog.text,
	cron pg_catalog.text,
	queue pg_catalog.text,
	input pg_catalog.jsonb)
	RETURNS void
	AS 'MODULE_PATHNAME', 'js_schedule'
	LANGUAGE C VOLATILE PARALLEL UNSAFE
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION job_state.schedule(pg_catalog.text, pg_catalog.text,
	pg_catalog.text, pg_catalog.jsonb) IS
	'submits input to queue at every tick of cron (5 fields, UTC) with idempotency key name@YYYY-MM-DDTHH:MIZ; after downtime only the latest missed tick';

CREATE FUNCTION job_state.unschedule(name pg_catalog.text,
	queue pg_catalog.text DEFAULT NULL)
	RETURNS void
	AS 'MODULE_PATHNAME', 'js_unschedule'
	LANGUAGE C VOLATILE PARALLEL UNSAFE
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION job_state.unschedule(pg_catalog.text, pg_catalog.text) IS
	'removes a schedule the caller owns or whose queue it may submit to (the jobs it submitted stay); without a queue, the one such schedule of that name';

/*
 * Observability: stale-token refusals, counted in a sequence per queue
 * (create_queue makes it) so that a refused transaction's rollback keeps
 * the count.
 */
CREATE FUNCTION job_state.stale_refusals(queue_id pg_catalog.int4)
	RETURNS pg_catalog.int8
	AS 'MODULE_PATHNAME', 'js_stale_refusals'
	LANGUAGE C STABLE STRICT PARALLEL RESTRICTED
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION job_state.stale_refusals(pg_catalog.int4) IS
	'stale-token refusals counted for a queue number (survives the refused transactions'' rollback); NULL for no such queue and for a queue the caller may not read';

/*
 * Wake-ups (notify.c, waiter.c): each queue's channels are named by its
 * secret queue.channel, so that only roles given the name by this
 * function, which checks their privileges, hear them.
 */
CREATE FUNCTION job_state.queue_channel(queue pg_catalog.text,
	kind pg_catalog.text DEFAULT 'work')
	RETURNS pg_catalog.text
	AS 'MODULE_PATHNAME', 'js_queue_channel'
	LANGUAGE C STABLE STRICT PARALLEL RESTRICTED
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION job_state.queue_channel(pg_catalog.text, pg_catalog.text) IS
	'the channel to LISTEN to: work (a new job, empty payload; needs claim) or done (an ended job''s id; needs read or submit)';

/*
 * ==== Views ===============================================================
 * Each is a security barrier.  job_event shows every job's history to whom
 * SELECT on it is granted; the others only the rows the current user may
 * see: my_jobs by submitter, the rest by has_queue_privilege.
 */

/*
 * The whole history: the stored rows and the events the job rows hold
 * (event.c decides what a row holds and writes it out before it would be
 * lost).  Read with the owner's rights, as the table it replaced was: a
 * grant of SELECT on it is what reads history; a security barrier, so that
 * a caller's function sees no column of a job beyond the events.
 */
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
/* its trigger: no writes */
CREATE TRIGGER job_state_append_only
	INSTEAD OF INSERT OR UPDATE OR DELETE ON job_state.job_event
	FOR EACH ROW EXECUTE FUNCTION job_state.append_only_trigger();

CREATE VIEW job_state.dead_letters WITH (security_barrier) AS
	SELECT id AS job_id, queue, status, reason, last_error, finished_at
	  FROM job_state.job
	 WHERE status IN ('failed', 'unknown')
	   AND queue OPERATOR(pg_catalog.=) ANY (ARRAY(
		   SELECT q.name FROM job_state.queue q
			WHERE job_state.has_queue_privilege(q.name, 'read')));
COMMENT ON VIEW job_state.dead_letters IS
	'failed jobs and jobs whose outcome is unknown, of the queues the current user may read: candidates for reconcile or redrive';

CREATE VIEW job_state.queue_stats WITH (security_barrier) AS
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
COMMENT ON VIEW job_state.queue_stats IS
	'one row per queue the current user may read: jobs per status, oldest waiting age, wait (accept to start) and run time percentiles over the last hour, throttle rate, dead letters, stale-token refusals, jobs waiting for a callback and jobs whose callback or heartbeat did not come in time';

CREATE VIEW job_state.my_jobs WITH (security_barrier) AS
	SELECT id AS job_id, queue, status, idempotency_key, input, result,
		   last_error, reason, attempts, accepted_at, started_at, finished_at,
		   progress, progress_generation, progress_at
	  FROM job_state.job
	 WHERE submitted_by::pg_catalog.oid OPERATOR(pg_catalog.=)
		   pg_catalog.to_regrole(pg_catalog.quote_ident(CURRENT_USER))::pg_catalog.oid;
COMMENT ON VIEW job_state.my_jobs IS
	'the jobs the current role submitted (submit records the calling role, following SET ROLE)';

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

CREATE VIEW job_state.queue_jobs WITH (security_barrier) AS
	SELECT id AS job_id, queue, status, submitted_by, idempotency_key, input,
		   result, last_error, reason, attempts, accepted_at, started_at,
		   finished_at, progress, progress_generation, progress_at
	  FROM job_state.job
	 WHERE queue OPERATOR(pg_catalog.=) ANY (ARRAY(
		   SELECT q.name FROM job_state.queue q
			WHERE job_state.has_queue_privilege(q.name, 'read')));
COMMENT ON VIEW job_state.queue_jobs IS
	'the jobs of the queues the current user may read (has_queue_privilege(queue, ''read''))';

/*
 * ==== Privileges ==========================================================
 * Nothing for PUBLIC but the claim_token type's functions, the cron and
 * privilege functions and stale_refusals; see the README for the role
 * recipe.
 */
REVOKE ALL ON ALL TABLES IN SCHEMA job_state FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA job_state FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA job_state FROM PUBLIC;
REVOKE ALL ON ALL PROCEDURES IN SCHEMA job_state FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
	job_state.claim_token_in(pg_catalog.cstring),
	job_state.claim_token_out(job_state.claim_token),
	job_state.claim_token_recv(pg_catalog.internal),
	job_state.claim_token_send(job_state.claim_token),
	job_state.claim_token_eq(job_state.claim_token, job_state.claim_token),
	job_state.claim_token_ne(job_state.claim_token, job_state.claim_token),
	job_state.token_job(job_state.claim_token),
	job_state.token_generation(job_state.claim_token),
	job_state.stale_refusals(pg_catalog.int4)
	TO PUBLIC;
GRANT EXECUTE ON FUNCTION
	job_state.cron_next(pg_catalog.text, pg_catalog.timestamptz),
	job_state.cron_prev(pg_catalog.text, pg_catalog.timestamptz)
	TO PUBLIC;
GRANT EXECUTE ON FUNCTION
	job_state.has_queue_privilege(pg_catalog.text, pg_catalog.text),
	job_state.has_queue_privilege(pg_catalog.text, pg_catalog.text, pg_catalog.text)
	TO PUBLIC;

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

/*
 * ==== The tables pg_dump keeps ============================================
 * Jobs, their history and everything they refer to, the sequences, the
 * schedules and the MAC keys (so tokens survive a restore).
 */
SELECT pg_catalog.pg_extension_config_dump('job_state.schedule', '');
SELECT pg_catalog.pg_extension_config_dump('job_state.secret', '');
SELECT pg_catalog.pg_extension_config_dump('job_state.queue', '');
SELECT pg_catalog.pg_extension_config_dump('job_state.resource', '');
SELECT pg_catalog.pg_extension_config_dump('job_state.slot', '');
SELECT pg_catalog.pg_extension_config_dump('job_state.bucket', '');
SELECT pg_catalog.pg_extension_config_dump('job_state.job', '');
SELECT pg_catalog.pg_extension_config_dump('job_state.job_event_log', '');
SELECT pg_catalog.pg_extension_config_dump('job_state.spend', '');
SELECT pg_catalog.pg_extension_config_dump('job_state.operation', '');
SELECT pg_catalog.pg_extension_config_dump('job_state.queue_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('job_state.job_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('job_state.job_event_seq', '');
/* added in 0.2.0: last, where the upgrade registers it too */
SELECT pg_catalog.pg_extension_config_dump('job_state.job_ref', '');
