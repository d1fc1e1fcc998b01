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

-- Target of the bare-INSERT floor for submit (same shape, same index).
CREATE TABLE bench_insert (LIKE bench_floor INCLUDING ALL)
	WITH (fillfactor = 80);

-- Queues.  'bench' keeps job_state's defaults except max_retries, which is
-- raised so that the fail(transient)+re-claim mode never runs out of
-- retries (it only matters to fail()); that mode passes retry_after => 0
-- so a failed job is ready again at once (at the tail of the backlog).
SELECT job_state.create_queue('bench', max_retries => 1000000000);
SELECT job_state.create_queue('bench_submit');
