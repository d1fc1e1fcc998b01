-- job_state_batch_each: claim up to :batch jobs, then one statement (one
-- transaction) that calls succeed() once per token.  What a worker can do
-- without succeed_many().
SELECT count(*) AS got, coalesce(array_agg(token)::text, '{}') AS toks FROM job_state.claim('bench', 'w' || :client_id, max_jobs => :batch) \gset
\if :got
SELECT count(*) FROM unnest(:toks::job_state.claim_token[]) AS t(tok), LATERAL job_state.succeed(t.tok);
\endif
