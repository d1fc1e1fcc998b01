-- schedules: the cron parser, schedule/unschedule, ticks submitted by sweep()
\getenv abs_srcdir PG_ABS_SRCDIR
\i :abs_srcdir/sql/include/fresh_extension.sql
\set VERBOSITY sqlstate
SET timezone = 'UTC';

-- errors as one line: SQLSTATE, message, detail
CREATE FUNCTION pg_temp.cron_error(expr text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	msg text;
	det text;
BEGIN
	PERFORM job_state.cron_next(expr, '2024-02-27 13:45:30+00');
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL;
	RETURN SQLSTATE || ': ' || msg || ' | ' || det;
END
$$;

--
-- parser: next and previous tick around Tuesday 2024-02-27 13:45:30 UTC
-- (2024 is a leap year)
--
SELECT c AS cron,
       job_state.cron_next(c, '2024-02-27 13:45:30+00') AS next,
       job_state.cron_prev(c, '2024-02-27 13:45:30+00') AS prev
  FROM (VALUES
	('* * * * *'),
	('0 * * * *'),
	('*/15 * * * *'),
	('5,50 * * * *'),
	('0-30/10 13 * * *'),
	('0-30/10,45 13 * * *'),
	('0 9-17/4 * * *'),
	('0 0 * * *'),
	('0 0 1 * *'),
	('0 0 31 * *'),
	('0 0 29 2 *'),
	('0 0 1 1 *'),
	('59 23 31 12 *'),
	('0 12 * * 0'),
	('0 12 * * 7'),
	('0 12 * * 5-7'),
	('0 12 * * 1-7/2'),
	('0 12 * * */7'),
	-- both day fields restricted: either matches (13th or Friday)
	('0 0 13 * 5'),
	-- day-of-month starts with *: both must match (days 1, 14, 27 that are Fridays)
	('0 0 */13 * 5'),
	-- day-of-week is *: day-of-month alone decides
	('0 0 13 * *'),
	('0 0 13 * */1'),
	('0 0 31 4,5 *'),
	(E'  1\t2   3 4  *  ')
  ) v(c);

-- strictly after / at or before
SELECT job_state.cron_next('0 * * * *', '2024-02-27 14:00:00+00') AS next_after_tick,
       job_state.cron_prev('0 * * * *', '2024-02-27 14:00:00+00') AS prev_at_tick,
       job_state.cron_next('0 * * * *', '2024-02-27 13:59:59.999999+00') AS next_just_before,
       job_state.cron_prev('0 * * * *', '2024-02-27 13:59:59.999999+00') AS prev_just_before;
-- year and leap-day boundaries
SELECT job_state.cron_next('0 0 29 2 *', '2024-02-29 00:00+00') AS next_leap_day,
       job_state.cron_prev('0 0 29 2 *', '2024-02-28 23:59+00') AS prev_leap_day,
       job_state.cron_next('* * * * *', '2024-12-31 23:59:30+00') AS next_year,
       job_state.cron_prev('59 23 31 12 *', '2025-01-01 00:00+00') AS prev_year,
       job_state.cron_next('0 0 29 2 1', '2024-03-01+00') AS either_day,
       job_state.cron_next('0 0 29 2 */7', '2024-03-01+00') AS leap_sunday;
-- before 2000 (negative timestamps)
SELECT job_state.cron_next('30 6 * * *', '1999-12-31 23:00+00') AS y2k,
       job_state.cron_prev('0 0 1 1 *', '1970-06-01+00') AS epoch;
-- UTC whatever the session time zone
SET timezone = 'America/New_York';
SELECT job_state.cron_next('0 9 * * *', '2024-07-01 00:00+00')
       = '2024-07-01 09:00+00'::timestamptz AS nine_utc;
SET timezone = 'UTC';
-- infinity has no tick; NULL in, NULL out (STRICT)
SELECT job_state.cron_next('* * * * *', 'infinity');
SELECT job_state.cron_prev('* * * * *', '-infinity');
SELECT job_state.cron_next(NULL, now()) IS NULL AS null_cron,
       job_state.cron_next('* * * * *', NULL) IS NULL AS null_time;

-- invalid expressions: 22023, the message names the field
SELECT c AS cron, pg_temp.cron_error(c) AS error
  FROM (VALUES
	(''),
	('   '),
	('* * * *'),
	('* * * * * *'),
	('@hourly'),
	('60 * * * *'),
	('-1 * * * *'),
	('99999999999 * * * *'),
	('* 24 * * *'),
	('* * 0 * *'),
	('* * 32 * *'),
	('* * * 0 *'),
	('* * * 13 *'),
	('* * * JAN *'),
	('* * * * 8'),
	('* * * * MON'),
	('5-2 * * * *'),
	('1- * * * *'),
	('1-2-3 * * * *'),
	('*/0 * * * *'),
	('*/61 * * * *'),
	('*/ * * * *'),
	('5/10 * * * *'),
	('1,5/10 * * * *'),
	('** * * * *'),
	('*5 * * * *'),
	('1,,2 * * * *'),
	('1, * * * *'),
	(',1 * * * *'),
	('0 0 30 2 *'),
	('0 0 31 2,4,6,9,11 *'),
	('0 0 30-31 2 */1')
  ) v(c);

--
-- schedule(): argument errors
--
SELECT job_state.create_queue('sched_q');
SELECT job_state.create_queue('sched_q2');
-- nulls: 22004
SELECT job_state.schedule(NULL, '* * * * *', 'sched_q', '{}');
SELECT job_state.schedule('s', NULL, 'sched_q', '{}');
SELECT job_state.schedule('s', '* * * * *', NULL, '{}');
SELECT job_state.schedule('s', '* * * * *', 'sched_q', NULL);
SELECT job_state.unschedule(NULL);
-- names: 1 to 128 characters, and the tick key must fit in 255 bytes: 22023
SELECT job_state.schedule('', '* * * * *', 'sched_q', '{}');
SELECT job_state.schedule(repeat('x', 129), '* * * * *', 'sched_q', '{}');
SELECT job_state.schedule(repeat('é', 119), '* * * * *', 'sched_q', '{}');
-- bad cron: 22023
SELECT job_state.schedule('s', '* * * * 9', 'sched_q', '{}');
-- no such queue: JS008
SELECT job_state.schedule('s', '* * * * *', 'sched_nope', '{}');
-- no such schedule: JS008
SELECT job_state.unschedule('sched_nope');
-- the longest name that fits (118 two-byte characters, 236 bytes)
SELECT job_state.schedule(repeat('é', 118), '0 0 1 1 *', 'sched_q', '{}');
SELECT job_state.unschedule(repeat('é', 118));
-- raw SQL cannot store a bad cron expression either
INSERT INTO job_state.schedule (name, cron, queue, input)
	VALUES ('s_raw', '61 * * * *', 'sched_q', '{}');

--
-- ticks.  Each block runs in one transaction so that now() is one instant.
-- Keys and ticks are UTC whatever the session time zone (+05:30 here).
--
SET timezone = 'Asia/Kolkata';
BEGIN;
SELECT job_state.schedule('every_minute', '* * * * *', 'sched_q', '{"n": 1}');
SELECT last_tick IS NULL AS never_ticked FROM job_state.schedule
 WHERE name = 'every_minute';
-- created this minute: this minute's tick is due.  sweep() counts lease
-- expiry only, so it returns 0 here.
SELECT job_state.sweep() AS moved;
SELECT job_state.sweep() AS moved;
-- one job, keyed name@YYYY-MM-DDTHH:MIZ with the tick in UTC
SELECT count(*) AS jobs FROM job_state.job WHERE queue = 'sched_q';
SELECT idempotency_key ~ '^every_minute@\d{4}-\d\d-\d\dT\d\d:\d\dZ$' AS key_format,
       idempotency_key = 'every_minute@' ||
         to_char(date_trunc('minute', now(), 'UTC') AT TIME ZONE 'UTC',
                 'YYYY-MM-DD"T"HH24:MI"Z"') AS key_is_tick,
       status, input
  FROM job_state.job WHERE queue = 'sched_q';
SELECT last_tick = date_trunc('minute', now(), 'UTC') AS last_tick_is_tick
  FROM job_state.schedule WHERE name = 'every_minute';
-- a stale last_tick (a second sweeper, a failover that lost the update)
-- submits the same key again: the existing job, never a second one
UPDATE job_state.schedule SET last_tick = NULL WHERE name = 'every_minute';
SELECT job_state.sweep() AS moved;
UPDATE job_state.schedule SET last_tick = last_tick - interval '1 day'
 WHERE name = 'every_minute';
SELECT job_state.sweep() AS moved;
SELECT count(*) AS jobs FROM job_state.job WHERE queue = 'sched_q';
SELECT last_tick = date_trunc('minute', now(), 'UTC') AS last_tick_is_tick
  FROM job_state.schedule WHERE name = 'every_minute';
-- the key is part of the contract: this is how a tick looks in the table
SELECT count(*) AS jobs FROM job_state.job
 WHERE queue = 'sched_q'
   AND idempotency_key = 'every_minute@' ||
         to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI"Z"');
COMMIT;
-- duplicate name in the same queue: 42710; names are per queue, so
-- another queue may have a schedule of that name
SELECT job_state.schedule('every_minute', '0 * * * *', 'sched_q', '{}');
SELECT job_state.schedule('every_minute', '0 * * * *', 'sched_q2', '{}');
-- one name in two queues: unschedule needs the queue (22023), then takes it
SELECT job_state.unschedule('every_minute');
SELECT job_state.unschedule('every_minute', 'sched_q2');
SELECT job_state.unschedule('every_minute', 'sched_q2');

-- after downtime only the latest missed tick is submitted
BEGIN;
SELECT job_state.schedule('hourly', '0 * * * *', 'sched_q2', '{"h": true}');
UPDATE job_state.schedule
   SET created_at = now() - interval '2 days',
       last_tick = date_trunc('hour', now(), 'UTC') - interval '5 hours'
 WHERE name = 'hourly';
SELECT job_state.sweep() AS moved;
SELECT job_state.sweep() AS moved;
SELECT count(*) AS jobs,
       bool_and(idempotency_key = 'hourly@' ||
         to_char(date_trunc('hour', now(), 'UTC') AT TIME ZONE 'UTC',
                 'YYYY-MM-DD"T"HH24:MI"Z"')) AS latest_tick
  FROM job_state.job WHERE queue = 'sched_q2';
SELECT last_tick = date_trunc('hour', now(), 'UTC') AS last_tick_is_tick
  FROM job_state.schedule WHERE name = 'hourly';
ROLLBACK;

-- a tick before the schedule was created is not submitted; one in the
-- minute it was created is
BEGIN;
SELECT job_state.schedule('yearly', '0 0 1 1 *', 'sched_q2', '{}');
UPDATE job_state.schedule
   SET created_at = job_state.cron_prev(cron, now()) + interval '1 minute'
 WHERE name = 'yearly';
SELECT job_state.sweep() AS moved;
SELECT count(*) AS jobs FROM job_state.job WHERE queue = 'sched_q2';
UPDATE job_state.schedule
   SET created_at = job_state.cron_prev(cron, now()) + interval '59 seconds'
 WHERE name = 'yearly';
SELECT job_state.sweep() AS moved;
SELECT count(*) AS jobs, min(idempotency_key) = 'yearly@' ||
         to_char(job_state.cron_prev('0 0 1 1 *', now()) AT TIME ZONE 'UTC',
                 'YYYY-MM-DD"T"HH24:MI"Z"') AS key_is_tick
  FROM job_state.job WHERE queue = 'sched_q2';
ROLLBACK;

-- a schedule that cannot submit gets a WARNING (with the inner SQLSTATE)
-- and is tried again; the other schedules and lease expiry go on
BEGIN;
SELECT job_state.create_queue('sched_gone');
SELECT job_state.schedule('a_broken', '* * * * *', 'sched_gone', '{}');
SELECT job_state.schedule('b_fine', '* * * * *', 'sched_q2', '{}');
DELETE FROM job_state.queue WHERE name = 'sched_gone';
-- a running job whose lease has run out, for the same sweep
SELECT job_state.create_queue('sched_lease');
SELECT job_id AS lease_job FROM job_state.submit('sched_lease', '{}') \gset
SELECT count(*) AS claimed
  FROM job_state.claim('sched_lease', 'w', lease => '1 millisecond');
SELECT pg_sleep(0.01);
\set VERBOSITY terse
SELECT job_state.sweep() AS moved;
\set VERBOSITY sqlstate
SELECT status, reason FROM job_state.job WHERE id = :lease_job;
SELECT name, last_tick IS NOT NULL AS ticked FROM job_state.schedule
 WHERE name IN ('a_broken', 'b_fine') ORDER BY name;
SELECT count(*) AS jobs FROM job_state.job WHERE queue = 'sched_q2';
-- the same key with another input is refused by submit (JS002): a warning too
UPDATE job_state.schedule SET input = '{"changed": true}', last_tick = NULL
 WHERE name = 'b_fine';
SELECT job_state.sweep() AS moved;
SELECT last_tick IS NULL AS not_advanced FROM job_state.schedule
 WHERE name = 'b_fine';
ROLLBACK;

-- schedules are the same for every queue option: a paused queue still
-- receives its ticks (claims are what pause stops)
BEGIN;
SELECT job_state.pause_queue('sched_q2');
SELECT job_state.schedule('paused_tick', '* * * * *', 'sched_q2', '{}');
SELECT job_state.sweep() AS moved;
SELECT count(*) AS jobs FROM job_state.job WHERE queue = 'sched_q2';
ROLLBACK;

-- unschedule: the row goes, the jobs stay
SELECT job_state.unschedule('every_minute');
SELECT count(*) AS schedules FROM job_state.schedule;
SELECT count(*) AS jobs FROM job_state.job WHERE queue = 'sched_q';
SELECT job_state.unschedule('every_minute');

-- the schedule table is dumped with the extension's data
SELECT 'job_state.schedule'::regclass = ANY (extconfig) AS dumped
  FROM pg_extension WHERE extname = 'job_state';
-- and not writable by PUBLIC
SELECT has_table_privilege('public', 'job_state.schedule', 'INSERT') AS public_insert,
       has_function_privilege('public', 'job_state.schedule(text, text, text, jsonb)',
                              'EXECUTE') AS public_schedule,
       has_function_privilege('public', 'job_state.cron_next(text, timestamptz)',
                              'EXECUTE') AS public_cron_next;
