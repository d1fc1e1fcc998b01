-- history: the job row holds its latest claim and the change that ended it;
-- every other event, and a held one before a change would alter what it
-- says, is a job_event_log row.  job_event reads the same either way.
\getenv abs_srcdir PG_ABS_SRCDIR
\i :abs_srcdir/sql/include/fresh_extension.sql
\set VERBOSITY sqlstate

CREATE FUNCTION pg_temp.hist(j bigint)
RETURNS TABLE(from_status job_state.status, to_status job_state.status,
              generation int, detail jsonb, stored boolean)
LANGUAGE sql AS $$
  SELECT e.from_status, e.to_status, e.generation, e.detail,
         EXISTS (SELECT FROM job_state.job_event_log l
                  WHERE l.queue = e.queue AND l.job_id = e.job_id AND l.seq = e.seq)
    FROM job_state.job_event e WHERE e.job_id = j ORDER BY e.seq
$$;
CREATE FUNCTION pg_temp.held(j bigint)
RETURNS TABLE(claim boolean, "end" boolean)
LANGUAGE sql AS $$
  SELECT held_claim_seq IS NOT NULL, held_end_seq IS NOT NULL
    FROM job_state.job WHERE id = j
$$;
-- every event of j as it reads now, to compare after a change
CREATE TEMP TABLE snapshot AS SELECT * FROM job_state.job_event WHERE false;
CREATE FUNCTION pg_temp.snap(j bigint) RETURNS void LANGUAGE sql AS $$
  DELETE FROM pg_temp.snapshot;
  INSERT INTO pg_temp.snapshot SELECT * FROM job_state.job_event WHERE job_id = j;
$$;
CREATE FUNCTION pg_temp.kept(j bigint) RETURNS boolean LANGUAGE sql AS $$
  SELECT NOT EXISTS (SELECT * FROM pg_temp.snapshot
                     EXCEPT SELECT * FROM job_state.job_event WHERE job_id = j)
$$;

-- a queue for each case, so that each claim takes the job it means
SELECT count(job_state.create_queue(q, retry_interval => '0', max_retries => 1,
                                    jitter => 'none'))
  FROM unnest('{ha,hb,hc,hd,he,hf,hg,hk,hm}'::text[]) q;

-- the happy path writes no history row: claim and succeed are held
SELECT job_id AS a FROM job_state.submit('ha', '{"n": 1}', budget => '{"usd": 10}') \gset
SELECT token AS t FROM job_state.claim('ha', 'worker-a') \gset
SELECT * FROM pg_temp.hist(:a);
SELECT * FROM pg_temp.held(:a);
SELECT job_state.succeed(:'t', '{"ok": true}');
SELECT * FROM pg_temp.hist(:a);
SELECT * FROM pg_temp.held(:a);
-- what they say is the row's: at is started_at and finished_at, seq the sequence's
SELECT e.at = j.started_at AS claim_at, e2.at = j.finished_at AS end_at,
       e.seq < e2.seq AS in_order,
       e2.seq <= (SELECT last_value FROM job_state.job_event_seq) AS seq_taken
  FROM job_state.job j
  JOIN job_state.job_event e ON e.job_id = j.id AND e.to_status = 'running'
  JOIN job_state.job_event e2 ON e2.job_id = j.id AND e2.to_status = 'succeeded'
 WHERE j.id = :a;
-- late spend on a succeeded job changes nothing the events say
SELECT job_state.charge(:'t', 'usd', 1) AS usd_left;
SELECT * FROM pg_temp.held(:a);
SELECT count(*) AS log_rows FROM job_state.job_event_log WHERE job_id = :a;

-- a retry: the claim is written out when the job leaves running for
-- accepted (which is a row), the next claim and its end are held
SELECT job_id AS b FROM job_state.submit('hb', '{"n": 2}') \gset
SELECT token AS t FROM job_state.claim('hb', 'worker-b') \gset
SELECT pg_temp.snap(:b);
SELECT job_state.fail(:'t', 'transient', '{"e": 1}');
SELECT pg_temp.kept(:b) AS claim_kept;
SELECT token AS t FROM job_state.claim('hb', 'worker-c') \gset
SELECT job_state.fail(:'t', 'transient', '{"e": 2}');
SELECT * FROM pg_temp.hist(:b);
SELECT * FROM pg_temp.held(:b);

-- a redrive writes both held events out, as they read, before its own row
SELECT pg_temp.snap(:b);
SELECT job_state.redrive(:b);
SELECT pg_temp.kept(:b) AS history_kept;
SELECT * FROM pg_temp.hist(:b);
SELECT * FROM pg_temp.held(:b);
SELECT count(DISTINCT seq) = count(*) AS seqs_unique FROM job_state.job_event WHERE job_id = :b;

-- a lease that runs out: unknown is held, a reconcile writes it out
SELECT job_id AS c FROM job_state.submit('hc', '{"n": 3}') \gset
SELECT token AS t FROM job_state.claim('hc', 'worker-d', lease => '1 ms') \gset
SELECT pg_sleep(0.01);
SELECT job_state.sweep() >= 1 AS expired;
SELECT * FROM pg_temp.held(:c);
SELECT pg_temp.snap(:c);
SELECT job_state.reconcile(:c, 'succeeded', '{"checked": true}');
SELECT pg_temp.kept(:c) AS history_kept;
SELECT * FROM pg_temp.hist(:c);

-- raw SQL cannot set the held seqs, and a change of what a held event
-- says has it written out first, as it was
SELECT job_id AS d FROM job_state.submit('hd', '{"n": 4}') \gset
SELECT token AS t FROM job_state.claim('hd', 'worker-e') \gset
\set VERBOSITY default
UPDATE job_state.job SET held_claim_seq = held_claim_seq + 1 WHERE id = :d;
\set VERBOSITY sqlstate
UPDATE job_state.job SET held_claim_seq = NULL WHERE id = :d;
UPDATE job_state.job SET held_end_seq = 1 WHERE id = :d;
INSERT INTO job_state.job (queue, input, held_claim_seq) VALUES ('hd', '{}', 5);
INSERT INTO job_state.job (queue, input, held_end_seq) VALUES ('hd', '{}', 5);
SELECT * FROM pg_temp.held(:d);
SELECT pg_temp.snap(:d);
UPDATE job_state.job SET worker = 'someone-else' WHERE id = :d;
SELECT pg_temp.kept(:d) AS history_kept;
SELECT * FROM pg_temp.hist(:d);
SELECT * FROM pg_temp.held(:d);
-- a raw-SQL end of a job whose claim is no longer held is a row
SELECT job_state.fail(:'t', 'permanent', '{"e": 3}');
SELECT * FROM pg_temp.hist(:d);
SELECT * FROM pg_temp.held(:d);
-- and changing the reason of a held end writes it out with the old reason
SELECT job_id AS e FROM job_state.submit('he', '{"n": 5}') \gset
SELECT token AS t FROM job_state.claim('he', 'worker-f') \gset
SELECT job_state.fail(:'t', 'permanent', '{"e": 4}');
SELECT * FROM pg_temp.held(:e);
SELECT pg_temp.snap(:e);
UPDATE job_state.job SET reason = 'changed by hand' WHERE id = :e;
SELECT pg_temp.kept(:e) AS history_kept;
SELECT * FROM pg_temp.hist(:e);
SELECT * FROM pg_temp.held(:e);
SELECT reason FROM job_state.job WHERE id = :e;
-- changing started_at of a held claim does too
SELECT job_id AS f FROM job_state.submit('hf', '{"n": 6}') \gset
SELECT token AS t FROM job_state.claim('hf', 'worker-g') \gset
SELECT pg_temp.snap(:f);
UPDATE job_state.job SET started_at = started_at - interval '1 hour' WHERE id = :f;
SELECT pg_temp.kept(:f) AS history_kept;
SELECT * FROM pg_temp.held(:f);
-- a heartbeat changes nothing an event says
SELECT job_id AS g FROM job_state.submit('hg', '{"n": 7}') \gset
SELECT token AS t FROM job_state.claim('hg', 'worker-h') \gset
SELECT count(*) FROM job_state.heartbeat(:'t', '1 min');
SELECT * FROM pg_temp.held(:g);
SELECT job_state.succeed(:'t');

-- with job_state.track_events off nothing new is held or stored; what was
-- held is written out when a change displaces it
SELECT job_id AS k FROM job_state.submit('hk', '{"n": 8}') \gset
SELECT token AS t FROM job_state.claim('hk', 'worker-k') \gset
SET job_state.track_events = off;
SELECT job_state.fail(:'t', 'transient');
RESET job_state.track_events;
SELECT * FROM pg_temp.hist(:k);
SELECT * FROM pg_temp.held(:k);

-- the view takes no writes
INSERT INTO job_state.job_event (queue, job_id, to_status, generation)
VALUES ('ha', :a, 'failed', 9);
UPDATE job_state.job_event SET generation = 9 WHERE job_id = :a;
DELETE FROM job_state.job_event WHERE job_id = :a;
SELECT count(*) AS a_events FROM job_state.job_event WHERE job_id = :a;

-- purge takes held and stored history with the job (:a holds both its
-- events, :e stores them)
SELECT job_state.purge('0') > 0 AS purged;
SELECT count(*) AS events_left FROM job_state.job_event WHERE job_id IN (:a, :e);
SELECT count(*) AS log_rows_left FROM job_state.job_event_log WHERE job_id IN (:a, :e);

-- the whole chain, for every job: each event starts where the one before
-- ended, in seq order, and the last one is where the job is
SELECT job_id AS m FROM job_state.submit('hm', '{"n": 9}') \gset
SELECT token AS t FROM job_state.claim('hm', 'w') \gset
SELECT job_state.fail(:'t', 'transient');
SELECT token AS t FROM job_state.claim('hm', 'w') \gset
SELECT job_state.fail(:'t', 'unknown');
SELECT job_state.reconcile(:m, 'accepted');
SELECT token AS t FROM job_state.claim('hm', 'w') \gset
SELECT job_state.succeed(:'t');
WITH e AS (
  SELECT job_id, from_status, to_status,
         lag(to_status) OVER (PARTITION BY job_id ORDER BY seq) AS prev,
         row_number() OVER (PARTITION BY job_id ORDER BY seq DESC) AS back
    FROM job_state.job_event)
SELECT count(*) FILTER (WHERE prev IS NOT NULL AND prev <> from_status) AS breaks,
       count(*) FILTER (WHERE back = 1 AND to_status <> j.status) AS wrong_ends
  FROM e JOIN job_state.job j ON j.id = e.job_id
 WHERE j.id <> :k;  -- its last change went unrecorded
SELECT * FROM pg_temp.hist(:m);

-- the history table gone (a superuser renamed it): job_state does not write
-- a change's history row into the view job_event (in a 0.1.0 schema the
-- table had that name, and the lookup falls back to it), it refuses the
-- change: 42809, the view is not a table
SELECT job_id AS g FROM job_state.submit('hm', '{"n": 10}') \gset
\set VERBOSITY default
\set SHOW_CONTEXT never
BEGIN;
ALTER TABLE job_state.job_event_log RENAME TO job_event_log_moved;
SELECT job_state.cancel(:g);
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
-- the view job_event renamed away too: nothing to fall back to, 42P01
BEGIN;
ALTER TABLE job_state.job_event_log RENAME TO job_event_log_moved;
ALTER VIEW job_state.job_event RENAME TO job_event_moved;
SELECT job_state.cancel(:g);
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
\set SHOW_CONTEXT errors
\set VERBOSITY sqlstate
SELECT status FROM job_state.job WHERE id = :g;
SELECT job_state.cancel(:g);
SELECT from_status, to_status FROM job_state.job_event_log WHERE job_id = :g ORDER BY seq;
