-- failover: the claim nonce that tokens carry (a claim this server never
-- saw is refused), and a queue's durability floor (min_synchronous_commit)
\getenv abs_srcdir PG_ABS_SRCDIR
\i :abs_srcdir/sql/include/fresh_extension.sql
\set VERBOSITY default

SELECT job_state.create_queue('fo', retry_interval => '0', jitter => 'none');
SELECT job_id FROM job_state.submit('fo', '{"n": 1}');

-- a job that was never claimed has nonce 0; each claim draws one, which
-- its token carries (bytes 17 to 20 of the 32)
SELECT claim_nonce FROM job_state.job WHERE id = 1;
SELECT token AS t1 FROM job_state.claim('fo', 'w1') \gset
SELECT claim_nonce <> 0 AS drawn,
       int4send(claim_nonce) = substring(decode(translate(:'t1', '-_', '+/') || '=', 'base64')
                                         FROM 17 FOR 4) AS carried
  FROM job_state.job WHERE id = 1;

-- raw SQL cannot change the nonce within a generation, nor insert one
UPDATE job_state.job SET claim_nonce = claim_nonce + 1 WHERE id = 1;
INSERT INTO job_state.job (queue, input, claim_nonce) VALUES ('fo', '{}', 7);

-- a claim lost in a failover, replayed on one server: the job is put back
-- as the standby had it (accepted, generation 0, no nonce), unchecked
SET job_state.restore = on;
UPDATE job_state.job SET status = 'accepted', generation = 0, attempts = 0,
       claim_nonce = 0, lease_expires_at = NULL, started_at = NULL, worker = NULL,
       held_claim_seq = NULL
 WHERE id = 1;
RESET job_state.restore;

-- the token is ahead of the job: its claim is unknown here, not "moved on"
SELECT job_state.succeed(:'t1');
SELECT * FROM job_state.heartbeat(:'t1');

-- claimed again here: the same generation, another nonce, another token
SELECT token AS t2 FROM job_state.claim('fo', 'w2') \gset
SELECT generation FROM job_state.job WHERE id = 1;
SELECT :'t1' <> :'t2' AS another_token,
       job_state.token_generation(:'t1') = job_state.token_generation(:'t2') AS same_generation;
SELECT job_state.succeed(:'t1', '{"by": "lost"}');
SELECT * FROM job_state.begin_operation(:'t1', 'mail');
SELECT job_state.fail(:'t1', 'permanent');
SELECT job_state.assert_claim(:'t1');
SELECT job_state.add_ref(:'t1', 'order', 'o-1');
SELECT * FROM job_state.wait_for_callback(:'t1', '1 hour');
SELECT outcome FROM job_state.succeed_many(ARRAY[:'t1']::job_state.claim_token[]);
SELECT status, worker, result FROM job_state.job WHERE id = 1;
SELECT job_state.succeed(:'t2', '{"by": "current"}');
SELECT status, result FROM job_state.job WHERE id = 1;

-- a redrive makes a new generation and a new nonce
SELECT job_id AS j3 FROM job_state.submit('fo', '{"n": 2}') \gset
SELECT token AS t3 FROM job_state.claim('fo', 'w3') \gset
SELECT claim_nonce AS n3 FROM job_state.job WHERE id = :j3 \gset
SELECT job_state.fail(:'t3', 'permanent');
SELECT job_state.redrive(:j3);
SELECT generation, claim_nonce <> :n3 AS new_nonce FROM job_state.job WHERE id = :j3;

-- ---- the durability floor ------------------------------------------------
SELECT job_state.create_queue('durable', min_synchronous_commit => 'remote_apply');
SELECT job_state.create_queue('bad', min_synchronous_commit => 'sometimes');
SELECT min_synchronous_commit FROM job_state.queue WHERE name = 'durable';

-- a submit raises synchronous_commit for the rest of its transaction, also
-- over SET LOCAL, and the transaction's end restores the session's value
SET synchronous_commit = local;
BEGIN;
SET LOCAL synchronous_commit = off;
SELECT job_id FROM job_state.submit('durable', '{"n": 1}');
SHOW synchronous_commit;
COMMIT;
SHOW synchronous_commit;

-- outside a transaction block: for the submit's own transaction
SELECT job_id, current_setting('synchronous_commit') AS during
  FROM job_state.submit('durable', '{"n": 2}');
SHOW synchronous_commit;

-- a queue without a floor changes nothing
BEGIN;
SELECT job_id FROM job_state.submit('fo', '{"n": 3}');
SHOW synchronous_commit;
COMMIT;

-- a completion under a claim of the queue's job raises it too
BEGIN;
SELECT token AS td FROM job_state.claim('durable', 'wd') \gset
SHOW synchronous_commit;
SELECT job_state.succeed(:'td');
SHOW synchronous_commit;
COMMIT;

-- a floor never lowers what the session set
SELECT job_state.alter_queue('durable', min_synchronous_commit => 'local');
SET synchronous_commit = remote_write;
BEGIN;
SELECT job_id FROM job_state.submit('durable', '{"n": 3}');
SHOW synchronous_commit;
COMMIT;
RESET synchronous_commit;

-- off removes the floor; NULL keeps it
SELECT job_state.alter_queue('durable', lease => '1 min');
SELECT min_synchronous_commit FROM job_state.queue WHERE name = 'durable';
SELECT job_state.alter_queue('durable', min_synchronous_commit => 'off');
SELECT min_synchronous_commit FROM job_state.queue WHERE name = 'durable';
