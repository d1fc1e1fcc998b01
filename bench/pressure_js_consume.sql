-- pressure (consumer, job_state): claim one job, then succeed it in a
-- second transaction; when the queue has nothing ready, wait 5 ms before
-- polling again.  claim stamps started_at and succeed finished_at with the
-- clock (not the transaction start).
SELECT count(*) AS got, coalesce(max(token::text), '') AS token FROM job_state.claim('bench', 'w' || :client_id) \gset
\if :got
SELECT job_state.succeed(:token);
\else
\sleep 5 ms
\endif
