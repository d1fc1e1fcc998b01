-- floor_insert_same_writes: submit's writes by hand-written SQL.  One job
-- row with a fresh idempotency key in a table shaped like job_state.job
-- (same five indexes, the unique key among them; ON CONFLICT DO NOTHING as
-- submit does), in one statement: a submit writes no history row.  No queue
-- lookup, no input hash (a 32-byte constant of SHA-256's size, which a keyed
-- job stores), no trigger, no function call, no NOTIFY.
\set r random(1, 4611686018427387903)
INSERT INTO bench_sw_job (queue, idempotency_key, input, input_hash, submitted_by) VALUES ('bench_submit', 'k' || :r::text, '{"kind": "bench", "n": 1}', '\x9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08'::bytea, current_user) ON CONFLICT (queue, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING;
