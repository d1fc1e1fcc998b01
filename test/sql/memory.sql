-- memory: no call leaks memory that outlives it.  One session runs every
-- function a worker, a submitter and an operator call, one job's life per
-- transaction, many times over; once the caches are warm, the backend's
-- memory (all its contexts, pg_backend_memory_contexts) must not grow.
-- Memory one call leaves behind in a long-lived context (TopMemoryContext,
-- CacheMemoryContext, a kept plan's) shows here; what a transaction leaks
-- into its own context is freed at COMMIT, so the rounds commit often.
\set VERBOSITY sqlstate
SELECT job_state.create_queue('memq', retry_interval => '0 s', jitter => 'none',
							  max_retries => 100);
SELECT job_state.create_queue('memlim', concurrency_limit => 4, per_key_limit => 2);
SELECT job_state.create_resource('memres', concurrency_limit => 3,
								 max_starts_per_second => 1000000);

CREATE PROCEDURE mem_cycles(n int, round text) LANGUAGE plpgsql AS $$
DECLARE
	t job_state.claim_token;
	ts job_state.claim_token[];
	u bigint;
	k text;
BEGIN
	FOR i IN 1..n LOOP
		k := round || '-' || i;
		-- submit (new key, then the same key again), claim, heartbeat,
		-- assert_claim, an operation, budget, succeed
		PERFORM job_state.submit('memq', jsonb_build_object('i', i), idempotency_key => k,
								 budget => '{"usd": 10}');
		PERFORM job_state.submit('memq', jsonb_build_object('i', i), idempotency_key => k);
		SELECT token INTO t FROM job_state.claim('memq', 'w');
		PERFORM job_state.heartbeat(t);
		PERFORM job_state.assert_claim(t);
		PERFORM job_state.begin_operation(t, 'op');
		PERFORM job_state.finish_operation(t, 'op', '{"ok": true}');
		PERFORM job_state.reserve(t, 'usd', 1);
		PERFORM job_state.charge(t, 'usd', 1);
		PERFORM job_state.succeed(t, '{"r": 1}');
		COMMIT;
		-- a transient failure, the retry claimed, a batch completion with a
		-- stale token in it
		PERFORM job_state.submit('memq', '{"f": 1}');
		SELECT token INTO t FROM job_state.claim('memq', 'w');
		PERFORM job_state.fail(t, 'transient', '{"e": 1}');
		SELECT array_agg(token) INTO ts FROM job_state.claim('memq', 'w', max_jobs => 2);
		PERFORM job_state.succeed_many(ts || t);
		COMMIT;
		-- the limited claim path: queue, key and resource slots
		PERFORM job_state.submit('memlim', '{}', concurrency_key => 'c' || (i % 3),
								 resource => 'memres');
		SELECT token INTO t FROM job_state.claim('memlim', 'w');
		PERFORM job_state.fail(t, 'permanent');
		COMMIT;
		-- operator calls
		SELECT job_id INTO u FROM job_state.submit('memq', '{"o": 1}');
		PERFORM job_state.cancel(u);
		PERFORM job_state.redrive(u);
		SELECT token INTO t FROM job_state.claim('memq', 'w');
		PERFORM job_state.fail(t, 'unknown');
		PERFORM job_state.reconcile(u, 'succeeded', '{}');
		PERFORM job_state.sweep();
		PERFORM * FROM job_state.queue_stats;
		COMMIT;
	END LOOP;
END $$;

CREATE FUNCTION mem_bytes() RETURNS bigint LANGUAGE sql AS
$$ SELECT sum(total_bytes)::bigint FROM pg_backend_memory_contexts $$;

-- warm the caches (plans, relation and type caches, the token key)
CALL mem_cycles(200, 'warm');
SELECT mem_bytes() AS before \gset
CALL mem_cycles(800, 'measured');
SELECT mem_bytes() - :before AS grown \gset
-- a steady backend does not grow at all; 800 rounds leaking 32 bytes in
-- just one call would grow it by about 38,000 bytes (with chunk headers)
SELECT CASE WHEN :grown < 24 * 1024 THEN 'no leak'
			ELSE 'backend memory grew by ' || :grown || ' bytes' END AS memory;
-- the rounds did what they say: every job ended as planned
SELECT queue, status, count(*) FROM job_state.job WHERE queue IN ('memq', 'memlim')
 GROUP BY 1, 2 ORDER BY 1, 2;
