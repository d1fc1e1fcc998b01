-- bench/bytes.sql: bytes per job on disk once jobs are done, job_state beside
-- the floor.  Run by `bench/run --bytes` in a database of its own (job_state
-- created, then bench/setup.sql, nothing else): :jobs jobs are submitted,
-- claimed and succeeded one at a time (job_state: submit_many without keys,
-- claim, succeed; the floor: the same inputs into bench_floor, then its
-- claim and done updates), then VACUUM FULL rewrites every table and index
-- (no dead versions, each index packed at its fillfactor), and each
-- relation's size is divided by the jobs.
\set ON_ERROR_STOP on
\o /dev/null
SELECT job_state.create_queue('bytes');
-- in calls of at most 1,000 jobs (submit_many takes up to 10,000)
SELECT sum((SELECT count(*) FROM job_state.submit_many('bytes',
	ARRAY(SELECT jsonb_build_object('kind', 'bench', 'n', g)
			FROM generate_series(b, least(b + 999, :jobs)) g))))
  FROM generate_series(1, :jobs, 1000) b;
\o
DO $$
DECLARE
	t job_state.claim_token;
BEGIN
	LOOP
		SELECT token INTO t FROM job_state.claim('bytes', 'worker-1');
		EXIT WHEN t IS NULL;
		PERFORM job_state.succeed(t, '{"ok": true}');
	END LOOP;
END $$;

INSERT INTO bench_floor (payload)
	SELECT jsonb_build_object('kind', 'bench', 'n', g) FROM generate_series(1, :jobs) g;
DO $$
DECLARE
	j bigint;
BEGIN
	LOOP
		UPDATE bench_floor SET status = 'running', worker = 'worker-1', attempts = attempts + 1,
			started_at = now()
		 WHERE id = (SELECT id FROM bench_floor WHERE status = 'ready' ORDER BY id LIMIT 1
					  FOR UPDATE SKIP LOCKED)
		RETURNING id INTO j;
		EXIT WHEN j IS NULL;
		UPDATE bench_floor SET status = 'done', finished_at = now() WHERE id = j;
	END LOOP;
END $$;

SELECT coalesce(to_regclass('job_state.job_event_log'),
				to_regclass('job_state.job_event')) AS hist \gset
VACUUM FULL job_state.job;
VACUUM FULL :hist;
VACUUM FULL bench_floor;
-- system, relation, bytes, bytes per job (relations of 0 or 1 page left out
-- of the list, counted in the total)
SELECT CASE WHEN c.relname LIKE 'bench_floor%' THEN 'floor' ELSE 'job_state' END AS system,
	   c.relname, pg_relation_size(c.oid) AS bytes,
	   round(pg_relation_size(c.oid)::numeric / :jobs, 1) AS per_job
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE c.relkind IN ('r', 'i')
   AND ((n.nspname = 'job_state' AND c.relname LIKE 'job%') OR c.relname LIKE 'bench_floor%')
   AND pg_relation_size(c.oid) > 8192
UNION ALL
SELECT CASE WHEN c.relname LIKE 'bench_floor%' THEN 'floor' ELSE 'job_state' END, 'total',
	   sum(pg_relation_size(c.oid)), round(sum(pg_relation_size(c.oid))::numeric / :jobs, 1)
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE c.relkind IN ('r', 'i')
   AND ((n.nspname = 'job_state' AND c.relname LIKE 'job%') OR c.relname LIKE 'bench_floor%')
 GROUP BY 1
 ORDER BY 1 DESC, 2;
SELECT round(avg(pg_column_size(j.*)), 1) AS job_row_bytes,
	   (SELECT round(avg(pg_column_size(e.*)), 1) FROM :hist e) AS event_row_bytes,
	   (SELECT round(count(*)::numeric / :jobs, 2) FROM job_state.job_event) AS events_per_job,
	   (SELECT round(count(*)::numeric / :jobs, 2) FROM :hist) AS stored_events_per_job,
	   (SELECT round(avg(pg_column_size(f.*)), 1) FROM bench_floor f) AS floor_row_bytes
  FROM job_state.job j;
