-- submit_nokey: submit without an idempotency key.
SELECT job_id FROM job_state.submit('bench_submit', '{"kind": "bench", "n": 1}');
