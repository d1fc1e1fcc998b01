-- js_cycle: submit one job, claim one, succeed it (three transactions); the
-- number of waiting jobs stays constant.  Used by --scale and --soak.
SELECT job_id FROM job_state.submit('bench', '{"kind": "bench", "n": 1}');
SELECT count(*) AS got, coalesce(max(token::text), '') AS token FROM job_state.claim('bench', 'w' || :client_id) \gset
\if :got
SELECT job_state.succeed(:token);
\endif
