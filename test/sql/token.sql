-- claim_token: text and binary form, accessors, MAC checked on use
\getenv abs_srcdir PG_ABS_SRCDIR
\i :abs_srcdir/sql/include/fresh_extension.sql
\set VERBOSITY default

SELECT job_state.create_queue('tok');
SELECT job_id FROM job_state.submit('tok', '{"n": 1}');
SELECT token AS t FROM job_state.claim('tok', 'w1') \gset
SELECT left(:'t', 42) || CASE WHEN right(:'t', 1) = 'A' THEN 'Q' ELSE 'A' END AS forged_for_eq \gset

-- 43 URL-safe characters, round trip through text and binary
SELECT length(:'t') AS len, :'t' ~ '^[A-Za-z0-9_-]{43}$' AS url_safe;
SELECT (:'t'::job_state.claim_token)::text = :'t' AS text_round_trip;
SELECT job_state.token_job(:'t'), job_state.token_generation(:'t');
SELECT :'t'::job_state.claim_token OPERATOR(job_state.=) :'t'::job_state.claim_token AS eq,
       :'t'::job_state.claim_token OPERATOR(job_state.<>) :'t'::job_state.claim_token AS ne,
       :'t'::job_state.claim_token OPERATOR(job_state.=) :'forged_for_eq'::job_state.claim_token AS eq_other;

-- binary round trip (send/recv through COPY BINARY); a short binary value is refused

CREATE TEMP TABLE tk (t job_state.claim_token);
INSERT INTO tk VALUES (:'t');
\copy tk TO 'token_test.bin' WITH (FORMAT binary)
CREATE TEMP TABLE tk2 (t job_state.claim_token);
\copy tk2 FROM 'token_test.bin' WITH (FORMAT binary)
\! rm -f token_test.bin
SELECT (SELECT t FROM tk) OPERATOR(job_state.=) (SELECT t FROM tk2) AS binary_round_trip;
CREATE TEMP TABLE tb (t bytea);
INSERT INTO tb VALUES ('\x0102');
\copy tb TO 'token_test.bin' WITH (FORMAT binary)
\copy tk2 FROM 'token_test.bin' WITH (FORMAT binary)
\! rm -f token_test.bin

-- malformed text: 22P02
\set VERBOSITY sqlstate
SELECT 'abc'::job_state.claim_token;
SELECT repeat('A', 44)::job_state.claim_token;
SELECT (repeat('A', 42) || '!')::job_state.claim_token;
-- one spelling per token: the 2 unused bits of the last character are zero
SELECT (repeat('A', 42) || 'E')::job_state.claim_token::text = repeat('A', 42) || 'E' AS canonical;
SELECT (repeat('A', 42) || 'B')::job_state.claim_token;
SELECT (repeat('A', 42) || '_')::job_state.claim_token;
SELECT (repeat('A', 42) || '=')::job_state.claim_token;
SELECT ''::job_state.claim_token;

-- a well-formed token whose MAC does not verify: JS007, before anything else
-- (flip the last character of the MAC)
SELECT left(:'t', 42) || CASE WHEN right(:'t', 1) = 'A' THEN 'Q' ELSE 'A' END AS forged \gset
SELECT job_state.succeed(:'forged');
SELECT job_state.heartbeat(:'forged');
SELECT job_state.assert_claim(:'forged');
SELECT job_state.fail(:'forged', 'transient');
SELECT job_state.charge(:'forged', 'x', 1);
SELECT * FROM job_state.succeed_many(ARRAY[:'forged']::job_state.claim_token[]);
-- a forged token for a job that does not exist is refused the same way
SELECT 'AAAAAAAAA-cAAAAAAQAAAAEAAAAAAAAAAAAAAAAAAAA' AS nojob \gset
SELECT job_state.succeed(:'nojob');
\set VERBOSITY default
SELECT job_state.succeed(:'forged');
-- the job is untouched
SELECT status, generation FROM job_state.job;

SELECT length(key) AS key_bytes FROM job_state.secret;

-- a token whose queue row is gone (restore mode only): JS008 (after the
-- MAC check)
\c
\set VERBOSITY default
BEGIN;
SET LOCAL job_state.restore = on;
DELETE FROM job_state.queue WHERE name = 'tok';
RESET job_state.restore;
SELECT job_state.succeed(:'t');
ROLLBACK;
-- without a MAC secret nothing can mint or check tokens
\c
BEGIN;
DELETE FROM job_state.secret;
SELECT job_state.heartbeat(:'t');
ROLLBACK;
SELECT status FROM job_state.job;
