-- secret: rotate_secret() and what happens to tokens in flight
\getenv abs_srcdir PG_ABS_SRCDIR
\i :abs_srcdir/sql/include/fresh_extension.sql
\set VERBOSITY default

SELECT job_state.create_queue('q', lease => '1 hour');
SELECT job_state.submit('q', '{"n": 1}') IS NOT NULL AS submitted;
SELECT job_state.submit('q', '{"n": 2}') IS NOT NULL AS submitted;
SELECT job_state.submit('q', '{"n": 3}') IS NOT NULL AS submitted;
SELECT token AS t1 FROM job_state.claim('q', 'w') \gset
SELECT count(*) AS keys FROM job_state.secret;

-- one rotation: the previous key still verifies, a new key signs
SELECT job_state.rotate_secret() AS retired;
SELECT count(*) AS keys FROM job_state.secret;
SELECT lease_expires_at > now() AS t1_still_valid FROM job_state.heartbeat(:'t1');
SELECT token AS t2 FROM job_state.claim('q', 'w') \gset
SELECT lease_expires_at > now() AS t2_valid FROM job_state.heartbeat(:'t2');

-- a second rotation retires t1's key: t1 is refused, t2 still verifies
SELECT job_state.rotate_secret() AS retired;
SELECT * FROM job_state.heartbeat(:'t1');
SELECT job_state.succeed(:'t1');
SELECT lease_expires_at > now() AS t2_valid FROM job_state.heartbeat(:'t2');

-- keep_previous => false retires every key but the new one at once
SELECT token AS t3 FROM job_state.claim('q', 'w') \gset
SELECT job_state.rotate_secret(keep_previous => false) AS retired;
SELECT count(*) AS keys FROM job_state.secret;
SELECT * FROM job_state.heartbeat(:'t2');
SELECT * FROM job_state.heartbeat(:'t3');
SELECT job_state.rotate_secret(NULL);

-- rotation inside a transaction that rolls back changes nothing
SELECT job_state.submit('q', '{"n": 4}') IS NOT NULL AS submitted;
SELECT token AS t4 FROM job_state.claim('q', 'w') \gset
BEGIN;
SELECT job_state.rotate_secret(false) AS retired;
ROLLBACK;
SELECT lease_expires_at > now() AS t4_valid FROM job_state.heartbeat(:'t4');

-- raw SQL on the table reaches the cache too (same session: the next
-- statement sees it)
DELETE FROM job_state.secret;
SELECT * FROM job_state.heartbeat(:'t4');
INSERT INTO job_state.secret (key) VALUES (job_state.new_secret());
SELECT * FROM job_state.heartbeat(:'t4');

-- the trigger fires whatever session_replication_role says
SELECT tgname, tgenabled FROM pg_trigger
 WHERE tgrelid = 'job_state.secret'::regclass AND NOT tgisinternal;
