-- a job row written as it could not have been submitted (a dump replayed
-- without job_state.restore) is refused with a hint naming the setting
\getenv abs_srcdir PG_ABS_SRCDIR
\i :abs_srcdir/sql/include/fresh_extension.sql
\set VERBOSITY sqlstate
SELECT job_state.create_queue('rst');

-- a finished job, a claimed one, as a replayed dump writes them
INSERT INTO job_state.job (queue, input, input_hash, status)
  VALUES ('rst', '{"n": 1}', '\x00', 'succeeded');
INSERT INTO job_state.job (queue, input, input_hash, generation, attempts)
  VALUES ('rst', '{"n": 2}', '\x00', 1, 1);
\set VERBOSITY default
INSERT INTO job_state.job (queue, id, input, input_hash, status)
  VALUES ('rst', 1001, '{"n": 1}', '\x00', 'succeeded');
INSERT INTO job_state.job (queue, id, input, input_hash, generation, attempts)
  VALUES ('rst', 1002, '{"n": 2}', '\x00', 1, 1);
\set VERBOSITY sqlstate

-- what the hint says works: the same rows go in with job_state.restore on
SET job_state.restore = on;
INSERT INTO job_state.job (queue, id, input, input_hash, status, generation, attempts, finished_at)
  VALUES ('rst', 1001, '{"n": 1}', '\x00', 'succeeded', 1, 1, now());
INSERT INTO job_state.job (queue, id, input, input_hash, generation, attempts)
  VALUES ('rst', 1002, '{"n": 2}', '\x00', 1, 1);
-- a keyed job restored without its input hash
INSERT INTO job_state.job (queue, id, input, idempotency_key)
  VALUES ('rst', 1003, '{"n": 3}', 'rst-key');
RESET job_state.restore;
-- nothing shows that input is the same, so the key is refused (JS002)
SELECT * FROM job_state.submit('rst', '{"n": 3}', 'rst-key');
SELECT id, status, generation FROM job_state.job WHERE queue = 'rst' ORDER BY id;
-- and the rules hold again
UPDATE job_state.job SET status = 'accepted' WHERE id = 1001;
