-- pressure (consumer, same writes): job_state's claim and success writes by
-- hand-written SQL (as floor_same_writes.sql): claim moves one job of
-- bench_sw_job to running and writes its history row, naming the worker;
-- the second transaction moves it to succeeded and writes another.  When
-- nothing is ready, wait 5 ms before polling again.  The claim walks the
-- ready index from its head, as the floor's does: no claim marks, no
-- frontier, so under a pinned horizon it slows as the floor does; the clean
-- phase is what it is for (CPU per job of job_state's writes alone).
WITH c AS (UPDATE bench_sw_job SET status = 'running', generation = generation + 1, attempts = attempts + 1, worker = 'w' || :client_id, lease_expires_at = clock_timestamp() + interval '5 min', started_at = clock_timestamp() WHERE queue = 'bench' AND id = (SELECT id FROM bench_sw_job WHERE queue = 'bench' AND status = 'accepted' AND run_after <= now() ORDER BY priority DESC, run_after, id LIMIT 1 FOR NO KEY UPDATE SKIP LOCKED) RETURNING queue, id, generation, worker), e AS (INSERT INTO bench_sw_event (queue, job_id, from_status, to_status, generation, detail) SELECT queue, id, 'accepted', 'running', generation, jsonb_build_object('worker', worker) FROM c) SELECT coalesce((SELECT id FROM c), 0) AS id, coalesce((SELECT generation FROM c), 0) AS gen \gset
\if :id
WITH u AS (UPDATE bench_sw_job SET status = 'succeeded', result = NULL, reason = NULL, lease_expires_at = NULL, finished_at = clock_timestamp() WHERE queue = 'bench' AND id = :id AND generation = :gen AND status = 'running' RETURNING queue, id, generation) INSERT INTO bench_sw_event (queue, job_id, from_status, to_status, generation, detail) SELECT queue, id, 'running', 'succeeded', generation, NULL FROM u;
\else
\sleep 5 ms
\endif
