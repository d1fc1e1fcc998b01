-- pressure (consumer, oracle): the floor's two transactions without the
-- search.  Each consumer takes the next id from the sequence
-- bench_oracle_take, which hands out the ids the producer's inserts get, and
-- claims that one row by its primary key; a row not yet committed (the
-- consumers are ahead of the producer) is tried again after 5 ms, the id
-- kept in :pend (bench/run starts every client with -D pend=0).  An id
-- that the producer's sequence passed by 1,000 without a row (a failed
-- insert leaves such a gap) is given up, so no consumer waits on it forever.
-- A queue
-- that takes a job in these same transactions (an insert, a claim, a
-- completion, each committed) does no less per job than this, so what it
-- completes under a pinned horizon bounds what such a queue can on the
-- machine.
WITH t AS (SELECT CASE WHEN :pend::bigint = 0 THEN nextval('bench_oracle_take') ELSE :pend::bigint END AS id),
c AS (UPDATE bench_oracle SET status = 'running', worker = 'w' || :client_id, attempts = attempts + 1, started_at = clock_timestamp() WHERE id = (SELECT id FROM t) AND status = 'ready' RETURNING id)
SELECT CASE WHEN (SELECT id FROM c) IS NULL
		AND (SELECT id FROM t) < (SELECT last_value FROM bench_oracle_id_seq) - 1000
	THEN 0 ELSE (SELECT id FROM t) END AS pend,
	coalesce((SELECT id FROM c), 0) AS id \gset
\if :id
UPDATE bench_oracle SET status = 'done', finished_at = clock_timestamp() WHERE id = :id;
\set pend 0
\else
\sleep 5 ms
\endif
