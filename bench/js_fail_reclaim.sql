-- job_state_retry: claim one job, then fail(transient) it with
-- retry_after => 0, which puts it back to accepted and ready at once; it is
-- re-claimed when the backlog comes round to it.  One script = one attempt.
SELECT count(*) AS got, coalesce(max(token::text), '') AS token FROM job_state.claim('bench', 'w' || :client_id) \gset
\if :got
SELECT job_state.fail(:token, 'transient', NULL, '0 s');
\endif
