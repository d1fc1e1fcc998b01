-- throttled_claim.sql: what a claim costs while a resource's start rate
-- holds every job back.  100,000 jobs wait in queue llm, all naming
-- resource slow (one start every 100 s); the first claim takes the burst,
-- the next ones find every shard of the bucket empty.  Prints the time of
-- five such claims and the WAL one of them writes.
--
-- Run it in a new, empty database of a throwaway cluster with job_state
-- installed (it creates the extension and fails if it is there):
--   createdb scratch && psql -X -d scratch -f bench/throttled_claim.sql
\set ON_ERROR_STOP 1
CREATE EXTENSION job_state;
SELECT job_state.create_resource('slow', NULL, 0.01);
SELECT job_state.create_queue('llm');
SET job_state.track_events = off;
INSERT INTO job_state.job (queue, input, input_hash, resource)
  SELECT 'llm', jsonb_build_object('n', g), ''::bytea, 'slow' FROM generate_series(1, 100000) g;
RESET job_state.track_events;
VACUUM ANALYZE job_state.job;
SELECT count(*) AS burst FROM job_state.claim('llm', 'w');
\timing on
SELECT count(*) AS throttled FROM job_state.claim('llm', 'w');
SELECT count(*) AS throttled FROM job_state.claim('llm', 'w');
SELECT count(*) AS throttled FROM job_state.claim('llm', 'w');
SELECT count(*) AS throttled FROM job_state.claim('llm', 'w');
SELECT count(*) AS throttled FROM job_state.claim('llm', 'w');
\timing off
SELECT pg_current_wal_lsn() AS before \gset
SELECT count(*) AS throttled FROM job_state.claim('llm', 'w');
SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), :'before') AS wal_bytes_of_one_throttled_claim;
