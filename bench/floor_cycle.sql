-- floor_cycle: insert one row, claim one, mark it done (three transactions);
-- the number of waiting rows stays constant.  Floor of js_cycle.sql.
INSERT INTO bench_floor (payload) VALUES ('{"kind": "bench", "n": 1}');
WITH c AS (UPDATE bench_floor SET status = 'running', worker = 'w' || :client_id, attempts = attempts + 1, started_at = now() WHERE id = (SELECT id FROM bench_floor WHERE status = 'ready' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id) SELECT coalesce((SELECT id FROM c), 0) AS id \gset
UPDATE bench_floor SET status = 'done', finished_at = now() WHERE id = :id;
