-- pressure (producer, same writes): one row into bench_sw_job, shaped like
-- job_state.job with the same indexes, by hand-written SQL: no key, so no
-- input hash, as job_state's submit of a job without a key; submitted_by,
-- accepted_at and run_after are their defaults, as submit's.  No queue lookup, no trigger, no
-- function call.
INSERT INTO bench_sw_job (queue, input) VALUES ('bench', '{"kind": "bench", "n": 1}');
