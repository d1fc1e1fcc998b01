-- floor: claim one row (UPDATE ... WHERE id = (SELECT ... FOR UPDATE SKIP
-- LOCKED LIMIT 1) RETURNING), then mark it done in a second transaction.
-- The CTE only turns "no row" into id 0 so \gset never fails; an empty claim
-- then updates nothing (bench/run's db check notices it).
WITH c AS (UPDATE bench_floor SET status = 'running', worker = 'w' || :client_id, attempts = attempts + 1, started_at = now() WHERE id = (SELECT id FROM bench_floor WHERE status = 'ready' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id) SELECT coalesce((SELECT id FROM c), 0) AS id \gset
UPDATE bench_floor SET status = 'done', finished_at = now() WHERE id = :id;
