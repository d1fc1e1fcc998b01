-- submit_many: :batch jobs without a key in one submit_many() call (one transaction).
SELECT count(*) FROM job_state.submit_many('bench_submit',
	ARRAY(SELECT jsonb_build_object('kind', 'bench', 'n', g) FROM generate_series(1, :batch) g));
