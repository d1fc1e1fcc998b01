-- submit_key: submit with a fresh idempotency key (random 62-bit number).
\set r random(1, 4611686018427387903)
SELECT job_id FROM job_state.submit('bench_submit', '{"kind": "bench", "n": 1}', idempotency_key => 'k' || :r::text);
