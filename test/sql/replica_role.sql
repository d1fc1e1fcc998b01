-- replica_role: every trigger of ours fires whatever session_replication_role says
\getenv abs_srcdir PG_ABS_SRCDIR
\i :abs_srcdir/sql/include/fresh_extension.sql
\set VERBOSITY sqlstate

-- no trigger on a table of ours can be skipped by the replica role (the
-- view job_event's INSTEAD OF trigger can be: a view's triggers cannot be
-- ENABLE ALWAYS, and a write it skips changes nothing, as shown below)
SELECT c.relname, t.tgname, t.tgenabled
  FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
  JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = 'job_state' AND NOT t.tgisinternal AND t.tgenabled <> 'A'
 ORDER BY 1, 2;

SELECT job_state.create_queue('q');
SELECT job_id AS j FROM job_state.submit('q', '{"n": 1}') \gset
SELECT token AS t FROM job_state.claim('q', 'w') \gset
SELECT job_state.succeed(:'t');
SELECT job_id AS live FROM job_state.submit('q', '{"n": 2}') \gset
-- a cancel out of accepted is a job_event_log row; the claim and succeed
-- of :j are held by its job row
SELECT job_id AS c FROM job_state.submit('q', '{"n": 3}') \gset
SELECT job_state.cancel(:c);
SELECT count(*) AS events_before FROM job_state.job_event WHERE job_id IN (:j, :c) \gset

SET session_replication_role = replica;
-- the state machine: a finished job cannot run again
UPDATE job_state.job SET status = 'running' WHERE id = :j;
-- the counters only go forward
UPDATE job_state.job SET generation = 0 WHERE id = :j;
-- the history is append-only: the view's skipped trigger leaves it as it
-- was, its table's refuses
DELETE FROM job_state.job_event WHERE job_id = :j;
DELETE FROM job_state.job_event_log WHERE job_id = :c;
UPDATE job_state.job_event_log SET generation = 7 WHERE job_id = :c;
SELECT count(*) = :events_before AS history_kept, count(*) AS events
  FROM job_state.job_event WHERE job_id IN (:j, :c);
-- while a job is live, neither history nor jobs can be truncated away
TRUNCATE job_state.job_event_log;
TRUNCATE job_state.job CASCADE;
-- a queue with jobs stays
DELETE FROM job_state.queue WHERE name = 'q';
-- jobs are inserted through submit's rules
INSERT INTO job_state.job (queue, input, status) VALUES ('q', '{}', 'succeeded');
-- the extension is not dropped while a job is live
DROP EXTENSION job_state;
RESET session_replication_role;
SELECT evtname, evtenabled FROM pg_event_trigger WHERE evtname = 'job_state_drop_guard';
SELECT id, status, generation FROM job_state.job ORDER BY id;
SELECT count(*) AS history FROM job_state.job_event WHERE job_id = :j;
