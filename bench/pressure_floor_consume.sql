-- pressure (consumer, floor): claim one row (FOR UPDATE SKIP LOCKED), then
-- mark it done in a second transaction; when nothing is ready, wait 5 ms
-- before polling again.  started_at and finished_at come from the clock, as
-- job_state stamps them, so that pickup latency includes the claim's own
-- walk of the ready index on both sides.
WITH c AS (UPDATE bench_floor SET status = 'running', worker = 'w' || :client_id, attempts = attempts + 1, started_at = clock_timestamp() WHERE id = (SELECT id FROM bench_floor WHERE status = 'ready' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id) SELECT coalesce((SELECT id FROM c), 0) AS id \gset
\if :id
UPDATE bench_floor SET status = 'done', finished_at = clock_timestamp() WHERE id = :id;
\else
\sleep 5 ms
\endif
