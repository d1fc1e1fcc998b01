-- floor_insert_notify: a bare INSERT plus pg_notify() in the same
-- transaction, as submit does (Async_Notify).  Compared with floor_insert it
-- isolates what NOTIFY costs: PostgreSQL serializes committing transactions
-- that notify (one lock held across the commit record's flush).
WITH i AS (INSERT INTO bench_insert (payload) VALUES ('{"kind": "bench", "n": 1}') RETURNING 1) SELECT pg_notify('job_state', 'bench') FROM i;
