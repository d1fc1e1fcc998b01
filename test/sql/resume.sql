-- claim resumes after this session's last claim in a queue (the mark), and
-- finds jobs behind the mark again: when the resumed scan comes back short,
-- after job_state.claim_rescan_interval, after a rollback
-- (without shared_preload_libraries: resume.out; with job_state preloaded
-- every claim starts at the queue's shared frontier instead, which nothing
-- ready is ever behind, so the order is strict: resume_1.out)
\getenv abs_srcdir PG_ABS_SRCDIR
\i :abs_srcdir/sql/include/fresh_extension.sql
\set VERBOSITY sqlstate
SELECT job_state.create_queue('rq');
-- jobs named by their key; run_after in the past gives them a fixed order
CREATE FUNCTION put(k text, at timestamptz, prio int = 0) RETURNS void
LANGUAGE sql AS $$
  SELECT FROM job_state.submit('rq', '{}', idempotency_key => k, run_after => at, priority => prio)
$$;
CREATE FUNCTION take(n int = 1) RETURNS SETOF text
LANGUAGE sql AS $$
  SELECT j.idempotency_key FROM job_state.claim('rq', 'w', max_jobs => n) c
    JOIN job_state.job j ON j.queue = 'rq' AND j.id = c.job_id
$$;
SELECT put('a' || i, '2026-01-01 00:00:00+00'::timestamptz + i * interval '1 min')
  FROM generate_series(1, 8) i;

SET job_state.claim_rescan_interval = '1h';
SELECT take();                      -- a1, from the head; the mark is a1
SELECT put('late', '2025-06-01');   -- ready, but behind the mark
SELECT take();                      -- a2: resumed after a1, late not seen
SELECT status FROM job_state.job WHERE idempotency_key = 'late';

-- 0 scans from the head every time: strict claim order
SET job_state.claim_rescan_interval = 0;
SELECT take();                      -- late
SET job_state.claim_rescan_interval = '1h';

-- higher priorities are scanned from their start, lower ones after the mark's
SELECT put('urgent', '2025-01-01', 5);
SELECT put('minor', '2025-01-01', -5);
SELECT take();                      -- urgent (above the mark's priority)
SELECT take();                      -- a3 (resumed at priority 5: a3 is below)
SELECT take();                      -- a4

-- a resumed scan that comes back short looks again from the head
SELECT put('late2', '2025-06-01');
SELECT take(6);                     -- a5..a8 and minor resumed (5 of 6), then late2 from the head
SELECT put('b1', '2026-02-01');
SELECT take();                      -- b1 (resumed after late2, the last job taken)
SELECT count(*) FROM job_state.job WHERE status = 'accepted';

-- a call whose resumed scan came back short and whose scan from the head
-- found nothing more keeps the mark of the jobs it took
SELECT put('d' || i, '2026-02-15 00:00:00+00'::timestamptz + i * interval '1 min')
  FROM generate_series(1, 2) i;
SELECT take(5);                     -- d1, d2 (resumed, short; nothing from the head)
SELECT put('late3', '2025-06-01');
SELECT put('d3', '2026-02-16');
SELECT take();                      -- d3: resumed after d2, late3 behind
SELECT take();                      -- late3 (the resumed scan is short)

-- a rolled-back claim forgets the marks: its jobs are ready again, behind them
SELECT put('c' || i, '2026-03-01 00:00:00+00'::timestamptz + i * interval '1 min')
  FROM generate_series(1, 4) i;
SELECT take();                      -- c1
BEGIN;
SELECT take();                      -- c2
ROLLBACK;
SELECT take();                      -- c2 again
BEGIN;
SAVEPOINT s;
SELECT take();                      -- c3
ROLLBACK TO SAVEPOINT s;
SELECT take();                      -- c3 again
COMMIT;

-- the mark is per queue
SELECT job_state.create_queue('rq2');
SELECT count(*) FROM (SELECT job_state.submit('rq2', jsonb_build_object('n', i)) FROM generate_series(1, 3) i) s;
SELECT c.job_id = (SELECT min(id) FROM job_state.job WHERE queue = 'rq2') AS first_of_rq2
  FROM job_state.claim('rq2', 'w') c;
SELECT take();                      -- c4: rq's mark untouched

-- the slot-taking claim (a queue with a limit) resumes too; a job passed
-- over for a full slot stays ahead of the mark
SELECT job_state.create_queue('lq', per_key_limit => 1);
CREATE FUNCTION lput(k text, at timestamptz, ckey text) RETURNS void
LANGUAGE sql AS $$
  SELECT FROM job_state.submit('lq', '{}', idempotency_key => k, run_after => at, concurrency_key => ckey)
$$;
CREATE FUNCTION ltake(OUT k text, OUT token job_state.claim_token) RETURNS SETOF record
LANGUAGE sql AS $$
  SELECT j.idempotency_key, c.token FROM job_state.claim('lq', 'w') c
    JOIN job_state.job j ON j.queue = 'lq' AND j.id = c.job_id
$$;
SELECT lput('l' || i, '2026-01-01 00:00:00+00'::timestamptz + i * interval '1 min',
            (ARRAY['A', 'A', 'B', 'B', 'C', 'D'])[i])
  FROM generate_series(1, 6) i;
SELECT k, token AS l1_token FROM ltake() \gset
SELECT :'k';                        -- l1 (key A)
SELECT k FROM ltake();              -- l3: l2 passed over (key A is full)
SELECT job_state.succeed(:'l1_token');
SELECT k FROM ltake();              -- l2: the mark stayed at l1
SELECT lput('llate', '2025-06-01', 'E');
SELECT k FROM ltake();              -- l5: resumed after l2, l4 passed over (key B)
SET job_state.claim_rescan_interval = 0;
SELECT k FROM ltake();              -- llate, from the head
SET job_state.claim_rescan_interval = '1h';
SELECT idempotency_key, status FROM job_state.job WHERE queue = 'lq' ORDER BY id;
DROP FUNCTION lput(text, timestamptz, text);
DROP FUNCTION ltake();

-- the setting
SET job_state.claim_rescan_interval = -1;
SET job_state.claim_rescan_interval = '2s';
SHOW job_state.claim_rescan_interval;
RESET job_state.claim_rescan_interval;
SHOW job_state.claim_rescan_interval;

DROP FUNCTION put(text, timestamptz, int);
DROP FUNCTION take(int);
