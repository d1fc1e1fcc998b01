-- Row writers (submit, claim, succeed) keep the IndexInfo of the job
-- table's plain btree indexes per backend (rowindex.c): predicates and
-- expressions compiled once, the unique index's speculative-insert
-- operators too.  Other indexes the owner adds are built per writer, as
-- the server does: a predicate calling a user function, a hash and a BRIN
-- index (BRIN keeps per-writer state), an exclusion constraint.  Every
-- btree index must hold exactly the rows it should after the writes
-- (amcheck's heapallindexed check recomputes each row's entry, predicate
-- and expressions included), and every write must go through all of them.
\getenv abs_srcdir PG_ABS_SRCDIR
\i :abs_srcdir/sql/include/fresh_extension.sql
\set VERBOSITY default
CREATE EXTENSION IF NOT EXISTS amcheck SCHEMA public;
SELECT job_state.create_queue('ii', retry_interval => '1 h', jitter => 'none');

CREATE FUNCTION public.ii_queue_is_ii(q text) RETURNS boolean
	LANGUAGE plpgsql IMMUTABLE AS $$ BEGIN RETURN q = 'ii'; END $$;
CREATE INDEX job_ii_user ON job_state.job (id) WHERE public.ii_queue_is_ii(queue);
CREATE INDEX job_ii_expr ON job_state.job (lower(queue), (priority + 1))
	WHERE status IN ('accepted', 'running');
CREATE INDEX job_ii_hash ON job_state.job USING hash (id);
CREATE INDEX job_ii_brin ON job_state.job USING brin (id);
ALTER TABLE job_state.job ADD CONSTRAINT job_ii_excl
	EXCLUDE USING btree (queue WITH OPERATOR(pg_catalog.=), id WITH OPERATOR(pg_catalog.=));

-- 20 submits with keys (the unique key index's speculative insert), 10
-- claims, 6 successes, 2 failures; a key submitted again finds its job
SELECT count(*) AS submitted
  FROM generate_series(1, 20) n,
	   LATERAL job_state.submit('ii', jsonb_build_object('n', n),
								idempotency_key => 'k' || n) s;
SELECT (SELECT job_id FROM job_state.submit('ii', '{"n": 3}', idempotency_key => 'k3'))
	 = (SELECT id FROM job_state.job WHERE idempotency_key = 'k3') AS same_job;
CREATE TEMP TABLE ii_tokens AS
SELECT c.token FROM generate_series(1, 10) g, LATERAL job_state.claim('ii', 'w' || g) c;
SELECT count(job_state.succeed(token)) AS succeeded
  FROM (SELECT token FROM ii_tokens LIMIT 6) t;
SELECT count(job_state.fail(token, 'transient', '{"e": 1}')) AS failed
  FROM (SELECT token FROM ii_tokens OFFSET 6 LIMIT 2) t;
SELECT status, count(*) FROM job_state.job WHERE queue = 'ii' GROUP BY 1 ORDER BY 1;

-- every btree index holds every row its predicate admits, and only those
CREATE TEMP VIEW ii_btree_check AS
SELECT c.relname, public.bt_index_check(c.oid, true)::text AS checked
  FROM pg_index i
  JOIN pg_class c ON c.oid = i.indexrelid
  JOIN pg_am a ON a.oid = c.relam
 WHERE i.indrelid = 'job_state.job'::regclass AND a.amname = 'btree'
 ORDER BY 1;
SELECT * FROM ii_btree_check;

-- a REINDEX and a dropped index in this backend: the next writes use the
-- indexes as they are now
REINDEX INDEX job_state.job_ready;
DROP INDEX job_state.job_ii_expr;
SELECT count(*) AS submitted
  FROM generate_series(21, 25) n,
	   LATERAL job_state.submit('ii', jsonb_build_object('n', n)) s;
SELECT count(job_state.succeed(c.token)) AS succeeded
  FROM generate_series(1, 3) g, LATERAL job_state.claim('ii', 'w' || g) c;
SELECT * FROM ii_btree_check;

ALTER TABLE job_state.job DROP CONSTRAINT job_ii_excl;
DROP INDEX job_state.job_ii_user, job_state.job_ii_hash, job_state.job_ii_brin;
DROP FUNCTION public.ii_queue_is_ii(text);
DROP VIEW ii_btree_check;
DROP EXTENSION amcheck;
