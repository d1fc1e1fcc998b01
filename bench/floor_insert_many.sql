-- floor_insert_many: one multi-row INSERT of :batch rows, the floor for submit_many.
INSERT INTO bench_insert (payload)
	SELECT jsonb_build_object('kind', 'bench', 'n', g) FROM generate_series(1, :batch) g;
