\getenv abs_srcdir PG_ABS_SRCDIR
\i :abs_srcdir/sql/include/fresh_extension.sql
-- Tenant isolation, the doors a review found and their classes:
--  1. unschedule checks privileges; schedule names are per queue
--  2. a schedule's ticks are submitted as its owner, and skipped once the
--     owner was dropped or lost the submit privilege
--  3. every lookup by id, name or token answers a role that holds no
--     privilege on the queue exactly as if the object did not exist
--  4. nothing tenant-identifying is readable by every role
--  5. wake-up channels are secret per queue (the payloads are checked by
--     the isolation spec submit-notify)
SET client_min_messages = warning;
DROP ROLE IF EXISTS regress_js_door_a, regress_js_door_b, regress_js_door_c,
	regress_js_doors, regress_js_door_nobody;
DROP FUNCTION IF EXISTS regress_js_answer(text, text);
RESET client_min_messages;
\set VERBOSITY terse

CREATE ROLE regress_js_doors;
CREATE ROLE regress_js_door_a IN ROLE regress_js_doors;
CREATE ROLE regress_js_door_b IN ROLE regress_js_doors;
CREATE ROLE regress_js_door_c IN ROLE regress_js_doors;
CREATE ROLE regress_js_door_nobody;
GRANT USAGE ON SCHEMA job_state TO regress_js_doors;
GRANT EXECUTE ON FUNCTION job_state.submit(text, jsonb, text, timestamptz, int, int,
	timestamptz, jsonb, text, text),
	job_state.submit_many(text, jsonb[], text[], timestamptz[], int[], int[],
	timestamptz[], jsonb[], text[], text[]),
	job_state.claim(text, text, interval, int),
	job_state.succeed(job_state.claim_token, jsonb),
	job_state.fail(job_state.claim_token, job_state.error_class, jsonb, interval),
	job_state.heartbeat(job_state.claim_token, interval, jsonb),
	job_state.reconcile(bigint, job_state.status, jsonb),
	job_state.redrive(bigint, int, jsonb, timestamptz),
	job_state.redrive_many(text, text, int, float8, int, jsonb, timestamptz),
	job_state.cancel(bigint, text),
	job_state.pause_queue(text),
	job_state.resume_queue(text),
	job_state.schedule(text, text, text, jsonb),
	job_state.unschedule(text, text),
	job_state.queue_channel(text, text)
	TO regress_js_doors;
GRANT EXECUTE ON PROCEDURE job_state.wait(bigint, interval, job_state.status,
	jsonb, jsonb, text, timestamptz) TO regress_js_doors;

-- An error as one line: SQLSTATE | message | detail | hint, with the text
-- hide (a name) shown as ? and every number as N, so that the answer for
-- another tenant's object can be compared with the one for a missing one.
CREATE FUNCTION regress_js_answer(q text, hide text DEFAULT NULL) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	st text; m text; d text; h text;
BEGIN
	EXECUTE q;
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, m = MESSAGE_TEXT,
		d = PG_EXCEPTION_DETAIL, h = PG_EXCEPTION_HINT;
	IF hide IS NOT NULL THEN
		m := replace(m, hide, '?');
		d := replace(d, hide, '?');
		h := replace(h, hide, '?');
	END IF;
	RETURN st || ' | ' || regexp_replace(concat_ws(' | ', m, coalesce(d, ''), coalesce(h, '')),
										 '\d+', 'N', 'g');
END
$$;

SELECT job_state.create_queue('door_a', max_retries => 0);
SELECT job_state.create_queue('door_b', max_retries => 0);
SELECT job_state.revoke_queue('door_a', 'public', 'all');
SELECT job_state.revoke_queue('door_b', 'public', 'all');
SELECT job_state.grant_queue('door_a', 'regress_js_door_a', 'all');
SELECT job_state.grant_queue('door_b', 'regress_js_door_b', 'all');
SELECT job_state.grant_queue('door_b', 'regress_js_door_c', 'submit');
-- a queue that is gone, with a token of it still valid
SELECT job_state.create_queue('door_gone');
SELECT job_id AS gone_job FROM job_state.submit('door_gone', '{}') \gset
SELECT token AS gone_token FROM job_state.claim('door_gone', 'w') \gset
SELECT job_state.succeed(:'gone_token');
SELECT job_state.purge('0');
DELETE FROM job_state.queue WHERE name = 'door_gone';
SELECT id AS a_qid FROM job_state.queue WHERE name = 'door_a' \gset
SELECT id AS b_qid FROM job_state.queue WHERE name = 'door_b' \gset

-- tenant b's jobs: one accepted, one running (its token)
SET ROLE regress_js_door_b;
SELECT job_id AS b_job FROM job_state.submit('door_b', '{"secret": "b"}', 'bk') \gset
SELECT job_id AS b_job2 FROM job_state.submit('door_b', '{"secret": "b2"}') \gset
SELECT token AS b_token FROM job_state.claim('door_b', 'wb') \gset
SELECT job_state.schedule('nightly', '0 3 * * *', 'door_b', '{}');
RESET ROLE;

-- 3. As tenant a, every call naming b's job, queue or token answers as
-- for a job, queue or token of a queue that does not exist.
SET ROLE regress_js_door_a;
SELECT x.call,
	   regress_js_answer(x.b, 'door_b') = regress_js_answer(x.missing, 'door_nope') AS same,
	   regress_js_answer(x.b, 'door_b') AS answer
  FROM (VALUES
	('cancel', format('SELECT job_state.cancel(%s)', :b_job), 'SELECT job_state.cancel(987654321)'),
	('redrive', format('SELECT job_state.redrive(%s)', :b_job), 'SELECT job_state.redrive(987654321)'),
	('reconcile', format('SELECT job_state.reconcile(%s, ''succeeded'')', :b_job),
	 'SELECT job_state.reconcile(987654321, ''succeeded'')'),
	('wait', format('CALL job_state.wait(%s, ''0'', NULL, NULL, NULL, NULL, NULL)', :b_job),
	 'CALL job_state.wait(987654321, ''0'', NULL, NULL, NULL, NULL, NULL)'),
	('submit', 'SELECT job_state.submit(''door_b'', ''{"secret": "b"}'', ''bk'')',
	 'SELECT job_state.submit(''door_nope'', ''{"secret": "b"}'', ''bk'')'),
	('submit_many', 'SELECT job_state.submit_many(''door_b'', ARRAY[''{}''::jsonb])',
	 'SELECT job_state.submit_many(''door_nope'', ARRAY[''{}''::jsonb])'),
	('claim', 'SELECT job_state.claim(''door_b'', ''wa'')',
	 'SELECT job_state.claim(''door_nope'', ''wa'')'),
	('redrive_many', 'SELECT job_state.redrive_many(''door_b'')',
	 'SELECT job_state.redrive_many(''door_nope'')'),
	('pause_queue', 'SELECT job_state.pause_queue(''door_b'')',
	 'SELECT job_state.pause_queue(''door_nope'')'),
	('resume_queue', 'SELECT job_state.resume_queue(''door_b'')',
	 'SELECT job_state.resume_queue(''door_nope'')'),
	('schedule', 'SELECT job_state.schedule(''a-into-b'', ''* * * * *'', ''door_b'', ''{}'')',
	 'SELECT job_state.schedule(''a-into-b'', ''* * * * *'', ''door_nope'', ''{}'')'),
	('queue_channel', 'SELECT job_state.queue_channel(''door_b'')',
	 'SELECT job_state.queue_channel(''door_nope'')'),
	('queue_channel done', 'SELECT job_state.queue_channel(''door_b'', ''done'')',
	 'SELECT job_state.queue_channel(''door_nope'', ''done'')'),
	('succeed', format('SELECT job_state.succeed(%L)', :'b_token'),
	 format('SELECT job_state.succeed(%L)', :'gone_token')),
	('fail', format('SELECT job_state.fail(%L, ''permanent'')', :'b_token'),
	 format('SELECT job_state.fail(%L, ''permanent'')', :'gone_token')),
	('heartbeat', format('SELECT job_state.heartbeat(%L)', :'b_token'),
	 format('SELECT job_state.heartbeat(%L)', :'gone_token'))
	) AS x(call, b, missing)
 ORDER BY 1;
-- has_queue_privilege: NULL, as for no such queue
SELECT job_state.has_queue_privilege('door_b', 'submit') AS b_submit,
	   job_state.has_queue_privilege('door_nope', 'submit') AS nope_submit,
	   job_state.has_queue_privilege('regress_js_door_b', 'door_b', 'read') AS b_reads_b,
	   job_state.has_queue_privilege('door_a', 'submit') AS a_submit;
-- 4. stale_refusals of b's queue: NULL, as for no such queue number
SELECT job_state.stale_refusals(:b_qid) AS b_refusals,
	   job_state.stale_refusals(987654) AS no_such_queue,
	   job_state.stale_refusals(:a_qid) AS a_refusals;
RESET ROLE;
-- b reads its own count; a role that holds some privilege on a queue (c
-- may submit to door_b) knows it exists and gets 42501 for the rest
SET ROLE regress_js_door_b;
SELECT job_state.stale_refusals(:b_qid) AS b_refusals;
RESET ROLE;
SET ROLE regress_js_door_c;
SELECT regress_js_answer(format('SELECT job_state.cancel(%s)', :b_job)) AS c_cancel;
SELECT regress_js_answer('SELECT job_state.claim(''door_b'', ''wc'')') AS c_claim;
SELECT job_state.has_queue_privilege('door_b', 'claim') AS c_claim_b;
RESET ROLE;

-- 1. unschedule: a cannot remove b's schedule, and is answered as for a
-- schedule that does not exist; names are per queue, so a may use the
-- same name in its own queue without learning that b has one
SET ROLE regress_js_door_a;
SELECT regress_js_answer('SELECT job_state.unschedule(''nightly'')', 'nightly')
	 = regress_js_answer('SELECT job_state.unschedule(''nope'')', 'nope') AS same,
	   regress_js_answer('SELECT job_state.unschedule(''nightly'')') AS answer;
SELECT regress_js_answer('SELECT job_state.unschedule(''nightly'', ''door_b'')', 'nightly')
	 = regress_js_answer('SELECT job_state.unschedule(''nope'', ''door_b'')', 'nope') AS same_in_queue;
SELECT job_state.schedule('nightly', '0 3 * * *', 'door_a', '{}');
RESET ROLE;
SELECT queue, name, owner FROM job_state.schedule ORDER BY queue, name;
SET ROLE regress_js_door_a;
SELECT job_state.unschedule('nightly');
RESET ROLE;
SELECT queue, name, owner FROM job_state.schedule ORDER BY queue, name;

-- 2. ticks are submitted as the schedule's owner, whoever sweeps
SET ROLE regress_js_door_b;
SELECT job_state.schedule('every', '* * * * *', 'door_b', '{"tick": "b"}');
SELECT job_state.schedule('revoked', '* * * * *', 'door_b', '{"tick": "revoked"}');
RESET ROLE;
SET ROLE regress_js_door_c;
SELECT job_state.schedule('orphan', '* * * * *', 'door_b', '{"tick": "orphan"}');
RESET ROLE;
BEGIN;
UPDATE job_state.schedule SET created_at = now() - interval '2 minutes';
SELECT job_state.sweep() AS moved;
SELECT input ->> 'tick' AS tick, submitted_by FROM job_state.job
 WHERE input ? 'tick' ORDER BY 1;
COMMIT;

-- b loses the privilege, c is dropped: their next ticks are skipped
-- (WARNING), never submitted, and last_tick moves on
SELECT job_state.revoke_queue('door_b', 'regress_js_door_b', 'all');
SET ROLE regress_js_door_b;
SELECT job_state.schedule('late', '* * * * *', 'door_b', '{}');
RESET ROLE;
DROP ROLE regress_js_door_c;
-- (renamed, so that their next tick has a key of its own)
BEGIN;
UPDATE job_state.schedule SET last_tick = now() - interval '10 minutes',
	   name = name || '2'
 WHERE name IN ('revoked', 'orphan');
SELECT job_state.sweep() AS moved;
SELECT input ->> 'tick' AS tick,
	   CASE WHEN submitted_by::oid IN (SELECT oid FROM pg_roles)
			THEN submitted_by::text ELSE 'a dropped role' END AS submitted_by
  FROM job_state.job
 WHERE input ? 'tick' ORDER BY 1;
SELECT name, last_tick = date_trunc('minute', now(), 'UTC') AS ticked
  FROM job_state.schedule WHERE name IN ('revoked2', 'orphan2') ORDER BY 1;
COMMIT;
-- the owner may still remove its schedule after it lost the privilege
SET ROLE regress_js_door_b;
SELECT job_state.unschedule('revoked2');
RESET ROLE;
SELECT job_state.grant_queue('door_b', 'regress_js_door_b', 'all');

-- 4. nothing in job_state is open to every role but the listed functions:
-- no table, view or sequence (the job id sequence, the refusal counters)
SELECT c.relname
  FROM pg_class c
 WHERE c.relnamespace = 'job_state'::regnamespace
   AND c.relkind IN ('r', 'v', 'S', 'm', 'p')
   AND (has_table_privilege('regress_js_door_nobody', c.oid, 'SELECT,INSERT,UPDATE,DELETE')
		OR (c.relkind = 'S'
			AND has_sequence_privilege('regress_js_door_nobody', c.oid, 'SELECT,USAGE,UPDATE')))
 ORDER BY 1;
SELECT p.oid::regprocedure AS public_function
  FROM pg_proc p
 WHERE p.pronamespace = 'job_state'::regnamespace
   AND has_function_privilege('regress_js_door_nobody', p.oid, 'EXECUTE')
 ORDER BY 1;

-- 5. the channels: one per queue and kind, named by a secret, carrying
-- neither the queue's name nor its number
SET ROLE regress_js_door_a;
SELECT job_state.queue_channel('door_a') ~ '^job_state_[0-9a-f]{32}$' AS work_channel,
	   job_state.queue_channel('door_a', 'done') ~ '^job_state_done_[0-9a-f]{32}$' AS done_channel,
	   substr(job_state.queue_channel('door_a'), 11)
		 = substr(job_state.queue_channel('door_a', 'done'), 16) AS one_secret;
SELECT regress_js_answer('SELECT job_state.queue_channel(''door_a'', ''all'')') AS bad_kind;
RESET ROLE;
SELECT count(DISTINCT channel) AS distinct_channels FROM job_state.queue;

DROP FUNCTION regress_js_answer(text, text);
DROP OWNED BY regress_js_door_a, regress_js_door_b, regress_js_doors, regress_js_door_nobody;
DROP ROLE regress_js_door_a, regress_js_door_b, regress_js_doors, regress_js_door_nobody;
