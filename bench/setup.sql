-- bench/setup.sql: objects of the throwaway benchmark database.
-- Run once by bench/run after CREATE EXTENSION job_state.

-- The floor: what a hand-rolled queue costs.  A plain table with a partial
-- index over the waiting rows; claim is UPDATE ... WHERE id = (SELECT ...
-- FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING, done is a second UPDATE.  Same
-- storage options as job_state.job so vacuum treats both alike.
CREATE TABLE bench_floor (
	id bigserial PRIMARY KEY,
	status text NOT NULL DEFAULT 'ready',
	payload jsonb NOT NULL,
	attempts int NOT NULL DEFAULT 0,
	worker text,
	created_at timestamptz NOT NULL DEFAULT now(),
	started_at timestamptz,
	finished_at timestamptz
) WITH (fillfactor = 80,
		autovacuum_vacuum_scale_factor = 0.01,
		autovacuum_vacuum_insert_scale_factor = 0.01,
		autovacuum_analyze_scale_factor = 0.02);
CREATE INDEX bench_floor_ready ON bench_floor (id) WHERE status = 'ready';

-- The oracle: the floor's rows (its columns, defaults and storage options;
-- an id sequence and primary key of its own, no ready index) and its two
-- transactions per job, without the search.  bench_oracle_take hands each
-- consumer the id of the next row the producer inserts (bench/run copies
-- bench_oracle_id_seq into it before every run); a claim is an UPDATE of
-- that row by its primary key.  The
-- least work per job of a queue that takes a job in these transactions: no
-- ready index, no search.
CREATE SEQUENCE bench_oracle_id_seq;
CREATE TABLE bench_oracle (LIKE bench_floor INCLUDING ALL EXCLUDING INDEXES)
	WITH (fillfactor = 80,
		autovacuum_vacuum_scale_factor = 0.01,
		autovacuum_vacuum_insert_scale_factor = 0.01,
		autovacuum_analyze_scale_factor = 0.02);
ALTER TABLE bench_oracle ALTER id SET DEFAULT nextval('bench_oracle_id_seq'),
	ADD PRIMARY KEY (id);
ALTER SEQUENCE bench_oracle_id_seq OWNED BY bench_oracle.id;
CREATE SEQUENCE bench_oracle_take;

-- The floor with job_state's writes: tables shaped like job_state.job and
-- job_state.job_event with the same indexes and storage options, and the
-- rows job_state wrote per job before its job row held the latest events
-- (the job row moved twice, one history row per change), by hand-written SQL without any of job_state's checks.  Not a
-- yardstick to meet but a measure: job_state beside it is what its logic
-- costs; it beside the floor is what those writes cost.
CREATE TABLE bench_sw_job (LIKE job_state.job INCLUDING ALL)
	WITH (fillfactor = 80,
		autovacuum_vacuum_scale_factor = 0.01,
		autovacuum_vacuum_insert_scale_factor = 0.01,
		autovacuum_analyze_scale_factor = 0.02);
-- (the stored history: job_event_log, or job_event in a build before the
-- job row held its latest events)
SELECT coalesce(to_regclass('job_state.job_event_log'),
				to_regclass('job_state.job_event')) AS hist \gset
CREATE TABLE bench_sw_event (LIKE :hist INCLUDING ALL)
	WITH (autovacuum_vacuum_insert_scale_factor = 0.05);

-- Target of the bare-INSERT floor for submit (same shape, same index).
CREATE TABLE bench_insert (LIKE bench_floor INCLUDING ALL)
	WITH (fillfactor = 80);

-- Queues.  'bench' keeps job_state's defaults except max_retries, which is
-- raised so that the fail(transient)+re-claim mode never runs out of
-- retries (it only matters to fail()); that mode passes retry_after => 0
-- so a failed job is ready again at once (at the tail of the backlog).
SELECT job_state.create_queue('bench', max_retries => 1000000000);
SELECT job_state.create_queue('bench_submit');
