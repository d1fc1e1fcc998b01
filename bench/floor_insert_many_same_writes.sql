-- floor_insert_many_same_writes: submit_many's writes by hand-written SQL.
-- :batch job rows without a key in a table shaped like job_state.job (same
-- five indexes) and their history rows, in one statement.  No queue lookup,
-- no input hash (a 32-byte constant of SHA-256's size), no trigger, no
-- function call, no NOTIFY.
WITH j AS (INSERT INTO bench_sw_job (queue, input, input_hash, submitted_by)
	SELECT 'bench_submit', jsonb_build_object('kind', 'bench', 'n', g),
		'\x9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08'::bytea,
		current_user::regrole
	FROM generate_series(1, :batch) g RETURNING queue, id)
INSERT INTO bench_sw_event (queue, job_id, to_status, generation)
	SELECT queue, id, 'accepted', 0 FROM j;
