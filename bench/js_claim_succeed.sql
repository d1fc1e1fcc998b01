-- job_state: claim one job, then succeed it in a second transaction.
-- count/max turn "no job" into got = 0 so \gset never fails on zero rows.
-- With -M prepared (what bench/run uses) :token becomes a parameter whose
-- type is resolved to job_state.claim_token; with -M simple write ':token'.
SELECT count(*) AS got, coalesce(max(token::text), '') AS token FROM job_state.claim('bench', 'w' || :client_id) \gset
\if :got
SELECT job_state.succeed(:token);
\endif
