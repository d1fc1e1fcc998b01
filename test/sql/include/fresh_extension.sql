-- every regress test starts from a fresh job_state (jobs left by the test before it are dropped on purpose)
SET client_min_messages = warning;
SET job_state.drop_live_jobs = on;
DROP EXTENSION job_state CASCADE;
RESET job_state.drop_live_jobs;
RESET client_min_messages;
CREATE EXTENSION job_state;
