-- job_state_batch: claim up to :batch jobs, then succeed_many() of those
-- tokens in a second transaction.  Tokens are URL-safe base64, so the text
-- form of the claim_token[] needs no quoting.
SELECT count(*) AS got, coalesce(array_agg(token)::text, '{}') AS toks FROM job_state.claim('bench', 'w' || :client_id, max_jobs => :batch) \gset
\if :got
SELECT count(*) FROM job_state.succeed_many(:toks);
\endif
