-- floor_insert_many_same_writes: submit_many's writes by hand-written SQL.
-- :batch job rows without a key in a table shaped like job_state.job (same
-- five indexes), in one statement: no history row (a submit writes none)
-- and no input hash (a job without a key has none).  No queue lookup, no
-- trigger, no function call, no NOTIFY.
INSERT INTO bench_sw_job (queue, input, submitted_by)
	SELECT 'bench_submit', jsonb_build_object('kind', 'bench', 'n', g), current_user::regrole
	FROM generate_series(1, :batch) g;
