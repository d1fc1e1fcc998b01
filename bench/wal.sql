-- bench/wal.sql: WAL per job by relation and record, job_state beside the
-- floor.  Run by `bench/run --wal` in a database of its own (job_state and
-- pg_walinspect created, then bench/setup.sql): :jobs jobs, each submitted,
-- claimed and succeeded in three transactions of its own, as a worker does
-- (job_state: submit without a key, claim, succeed; the floor: INSERT, the
-- claim UPDATE ... FOR UPDATE SKIP LOCKED, the done UPDATE), one system
-- after the other.  Then pg_walinspect reads the WAL each system wrote, and
-- each record is counted to the relation of its first block (records of no
-- block, such as commits, to their resource manager).  A checkpoint before
-- each system, and every page it touches written before its run starts, so
-- full-page images are few; they are shown apart.
\set ON_ERROR_STOP on
\o /dev/null
SELECT job_state.create_queue('wal');

CREATE PROCEDURE pg_temp.js_jobs(n int) LANGUAGE plpgsql AS $$
DECLARE
	t job_state.claim_token;
BEGIN
	FOR i IN 1..n LOOP
		PERFORM job_state.submit('wal', jsonb_build_object('kind', 'bench', 'n', i));
		COMMIT;
		SELECT token INTO t FROM job_state.claim('wal', 'worker-1');
		COMMIT;
		PERFORM job_state.succeed(t, '{"ok": true}');
		COMMIT;
	END LOOP;
END $$;

CREATE PROCEDURE pg_temp.floor_jobs(n int) LANGUAGE plpgsql AS $$
DECLARE
	j bigint;
BEGIN
	FOR i IN 1..n LOOP
		INSERT INTO bench_floor (payload) VALUES (jsonb_build_object('kind', 'bench', 'n', i));
		COMMIT;
		UPDATE bench_floor SET status = 'running', worker = 'worker-1', attempts = attempts + 1,
			started_at = now()
		 WHERE id = (SELECT id FROM bench_floor WHERE status = 'ready' ORDER BY id LIMIT 1
					  FOR UPDATE SKIP LOCKED)
		RETURNING id INTO j;
		COMMIT;
		UPDATE bench_floor SET status = 'done', finished_at = now() WHERE id = j;
		COMMIT;
	END LOOP;
END $$;

-- warm-up: a first round of each, so the pages the measured runs start on
-- exist; then a checkpoint
CALL pg_temp.js_jobs(200);
CALL pg_temp.floor_jobs(200);
CHECKPOINT;
SELECT pg_current_wal_insert_lsn() AS js_start \gset
CALL pg_temp.js_jobs(:jobs);
SELECT pg_current_wal_insert_lsn() AS js_end \gset
-- read before the next checkpoint, which may recycle these segments
CREATE TEMP TABLE wal_rec AS
SELECT 'job_state' AS system, r.* FROM pg_get_wal_records_info(:'js_start', :'js_end') r;
CHECKPOINT;
SELECT pg_current_wal_insert_lsn() AS floor_start \gset
CALL pg_temp.floor_jobs(:jobs);
SELECT pg_current_wal_insert_lsn() AS floor_end \gset
INSERT INTO wal_rec
SELECT 'floor', r.* FROM pg_get_wal_records_info(:'floor_start', :'floor_end') r;
\o

-- system, relation (or resource manager), record kind, records per job,
-- bytes per job without and with full-page images
SELECT w.system,
	   coalesce(c.relname, CASE WHEN w.block_ref IS NULL THEN lower(w.resource_manager) ELSE 'other' END) AS relation,
	   w.resource_manager || ' ' || split_part(w.record_type, ' ', 1) AS record,
	   round(count(*)::numeric / :jobs, 2) AS per_job,
	   round(sum(w.record_length - w.fpi_length)::numeric / :jobs, 1) AS bytes_per_job,
	   round(sum(w.fpi_length)::numeric / :jobs, 1) AS fpi_per_job
  FROM wal_rec w
  LEFT JOIN pg_class c
	ON c.relfilenode = substring(w.block_ref FROM 'rel [0-9]+/[0-9]+/([0-9]+)')::oid
 GROUP BY 1, 2, 3
 ORDER BY 1 DESC, 5 DESC;

-- totals per system: WAL bytes per job (records and the space between
-- them, from the LSNs) and the records' own bytes
SELECT system, round(count(*)::numeric / :jobs, 2) AS records_per_job,
	   round(sum(record_length - fpi_length)::numeric / :jobs, 1) AS bytes_per_job,
	   round(sum(fpi_length)::numeric / :jobs, 1) AS fpi_per_job,
	   round(CASE system WHEN 'job_state' THEN pg_wal_lsn_diff(:'js_end', :'js_start')
			 ELSE pg_wal_lsn_diff(:'floor_end', :'floor_start') END / :jobs, 1) AS lsn_bytes_per_job
  FROM wal_rec GROUP BY 1 ORDER BY 1 DESC;
