-- pressure (producer, job_state): one job into the queue 'bench', no key.
-- bench/run runs it with pgbench -R (a fixed offered rate).
SELECT job_id FROM job_state.submit('bench', '{"kind": "bench", "n": 1}'::jsonb);
