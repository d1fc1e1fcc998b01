-- floor_batch: claim :batch rows in one UPDATE, mark them done in a second
-- transaction (the hand-rolled equivalent of claim(max_jobs) + succeed_many).
WITH c AS (UPDATE bench_floor SET status = 'running', worker = 'w' || :client_id, attempts = attempts + 1, started_at = now() WHERE id IN (SELECT id FROM bench_floor WHERE status = 'ready' ORDER BY id LIMIT :batch FOR UPDATE SKIP LOCKED) RETURNING id) SELECT count(*) AS got, coalesce(array_agg(id)::text, '{}') AS ids FROM c \gset
UPDATE bench_floor SET status = 'done', finished_at = now() WHERE id = ANY (:ids::bigint[]);
