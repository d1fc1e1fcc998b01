\getenv abs_srcdir PG_ABS_SRCDIR
\i :abs_srcdir/sql/include/fresh_extension.sql
-- Two tenants, each with its own queue: neither can submit to, claim from,
-- act on, operate, read or probe (through idempotency answers) the other's.
SET client_min_messages = warning;
DROP ROLE IF EXISTS regress_js_tenant_a, regress_js_tenant_b, regress_js_alice,
	regress_js_tenants, regress_js_renamed;
RESET client_min_messages;
\set VERBOSITY terse

CREATE ROLE regress_js_tenants;		-- the recipe's function grants, once
CREATE ROLE regress_js_tenant_a IN ROLE regress_js_tenants;
CREATE ROLE regress_js_tenant_b IN ROLE regress_js_tenants;
CREATE ROLE regress_js_alice IN ROLE regress_js_tenant_a;	-- a member of tenant a
GRANT USAGE ON SCHEMA job_state TO regress_js_tenants;
GRANT EXECUTE ON FUNCTION job_state.submit(text, jsonb, text, timestamptz, int, int,
	timestamptz, jsonb, text, text),
	job_state.claim(text, text, interval, int),
	job_state.heartbeat(job_state.claim_token, interval, jsonb),
	job_state.assert_claim(job_state.claim_token),
	job_state.succeed(job_state.claim_token, jsonb),
	job_state.succeed_many(job_state.claim_token[], jsonb[]),
	job_state.fail(job_state.claim_token, job_state.error_class, jsonb, interval),
	job_state.charge(job_state.claim_token, text, numeric),
	job_state.begin_operation(job_state.claim_token, text),
	job_state.reconcile(bigint, job_state.status, jsonb),
	job_state.redrive(bigint, int, jsonb, timestamptz),
	job_state.cancel(bigint, text),
	job_state.purge(interval),
	job_state.pause_queue(text),
	job_state.schedule(text, text, text, jsonb)
	TO regress_js_tenants;
GRANT SELECT ON job_state.queue_jobs, job_state.my_jobs, job_state.dead_letters, job_state.queue_privileges,
	job_state.queue_stats TO regress_js_tenants;

SELECT job_state.create_queue('qa', max_retries => 0);
SELECT job_state.create_queue('qb', max_retries => 0);
-- a queue never granted on is open
SELECT job_state.has_queue_privilege('regress_js_tenant_b', 'qa', 'submit') AS open_before;
SELECT count(*) FROM job_state.queue_privileges;

-- the recipe: no privilege for PUBLIC, every privilege for the tenant
SELECT job_state.revoke_queue('qa', 'public', 'all');
SELECT job_state.grant_queue('qa', 'regress_js_tenant_a', 'submit', 'claim', 'operate', 'read');
SELECT job_state.revoke_queue('qb', 'public', 'all');
SELECT job_state.grant_queue('qb', 'regress_js_tenant_b', 'all');
SELECT queue, grantee, privilege FROM job_state.queue_privileges ORDER BY 1, 2, 3;
SELECT name, acl FROM job_state.queue ORDER BY name;

-- tenant b has a job with key k1 (and a secret input)
SET ROLE regress_js_tenant_b;
SELECT job_id AS b1, created FROM job_state.submit('qb', '{"secret": "b"}', 'k1') \gset
SELECT :b1 > 0 AS b_submitted, :'created' AS created;
RESET ROLE;

SET ROLE regress_js_tenant_a;
SELECT job_state.has_queue_privilege('qa', 'submit') AS a_on_qa,
	   job_state.has_queue_privilege('qb', 'submit') AS a_on_qb,
	   job_state.has_queue_privilege('qb', 'read') AS a_reads_qb;
SELECT job_id AS a1 FROM job_state.submit('qa', '{"mine": "a"}', 'k1') \gset
SELECT :a1 > :b1 AS a_submitted;
\set VERBOSITY default
-- the same key in b's queue: refused before the key is looked at, so no
-- created = false, no JS002 naming b's job
SELECT * FROM job_state.submit('qb', '{"secret": "b"}', 'k1');
\set VERBOSITY terse
SELECT * FROM job_state.submit('qb', '{"guess": 1}', 'k1');
SELECT * FROM job_state.submit('qb', '{}');
-- no claim, no read, no operating b's queue
SELECT * FROM job_state.claim('qb', 'a-worker');
SELECT job_id, queue FROM job_state.queue_jobs ORDER BY job_id;
SELECT job_id FROM job_state.my_jobs;
SELECT queue FROM job_state.queue_stats ORDER BY queue;
SELECT job_state.cancel(:b1);
SELECT job_state.redrive(:b1);
SELECT job_state.reconcile(:b1, 'succeeded');
SELECT job_state.pause_queue('qb');
SELECT job_state.schedule('a-into-b', '* * * * *', 'qb', '{}');
SELECT count(*) FROM job_state.queue_privileges;	-- a operates qa only
SELECT job_state.grant_queue('qb', 'regress_js_tenant_a', 'all');
RESET ROLE;

-- tenant b claims; a stolen token is useless to tenant a
SET ROLE regress_js_tenant_b;
SELECT token AS tb FROM job_state.claim('qb', 'b-worker') \gset
RESET ROLE;
SET ROLE regress_js_tenant_a;
SELECT job_state.heartbeat(:'tb');
SELECT job_state.assert_claim(:'tb');
SELECT job_state.succeed(:'tb', '{"stolen": true}');
SELECT job_state.succeed_many(ARRAY[:'tb']::job_state.claim_token[], ARRAY['{}']::jsonb[]);
SELECT job_state.fail(:'tb', 'permanent', '{}');
SELECT job_state.charge(:'tb', 'usd', 1);
SELECT job_state.begin_operation(:'tb', 'op');
RESET ROLE;
SELECT status, result FROM job_state.job WHERE id = :b1;

-- a member of tenant a inherits its privileges
SET ROLE regress_js_alice;
SELECT job_state.has_queue_privilege('qa', 'claim') AS alice_claims_qa;
SELECT job_id = :a1 AS claimed_a1 FROM job_state.claim('qa', 'alice');
SELECT * FROM job_state.claim('qb', 'alice');
RESET ROLE;

-- purge by tenant b removes b's finished jobs only
SET ROLE regress_js_tenant_b;
SELECT job_state.succeed(:'tb', '{"done": true}');
RESET ROLE;
SELECT job_id AS a3 FROM job_state.submit('qa', '{"n": 3}') \gset
SELECT job_state.cancel(:a3);	-- the superuser operates every queue
SET ROLE regress_js_tenant_b;
SELECT job_state.purge('0') AS b_purged;
RESET ROLE;
SELECT queue, status FROM job_state.job WHERE id IN (:a3, :b1) ORDER BY queue;
SELECT job_state.purge('0') AS owner_purged;

-- a revoke applies to tokens already handed out, from the next call
SET ROLE regress_js_tenant_a;
SELECT job_id AS a2 FROM job_state.submit('qa', '{"n": 2}') \gset
SELECT token AS ta FROM job_state.claim('qa', 'a-worker') \gset
SELECT job_state.heartbeat(:'ta') IS NOT NULL AS beat_before;
RESET ROLE;
SELECT job_state.revoke_queue('qa', 'regress_js_tenant_a', 'claim');
SET ROLE regress_js_tenant_a;
SELECT job_state.heartbeat(:'ta');
SELECT job_state.has_queue_privilege('qa', 'claim') AS claims_after_revoke,
	   job_state.has_queue_privilege('qa', 'submit') AS submits_after_revoke;
RESET ROLE;
SELECT job_state.grant_queue('qa', 'regress_js_tenant_a', 'claim');
SET ROLE regress_js_tenant_a;
SELECT job_state.succeed(:'ta', '{}');
RESET ROLE;

-- PUBLIC again: a grant to public opens the queue to every role
SELECT job_state.grant_queue('qb', 'public', 'read');
SET ROLE regress_js_tenant_a;
SELECT job_state.has_queue_privilege('qb', 'read') AS a_reads_qb_now;
SELECT count(*) > 0 AS a_sees_qb_jobs FROM job_state.queue_jobs WHERE queue = 'qb';
RESET ROLE;
SELECT job_state.revoke_queue('qb', 'public', 'read');

-- who submitted is the role itself: a rename keeps its jobs, a role
-- dropped and made again under its name does not get them
SET ROLE regress_js_alice;
SELECT job_id AS al FROM job_state.submit('qa', '{"by": "alice"}') \gset
RESET ROLE;
ALTER ROLE regress_js_alice RENAME TO regress_js_renamed;
SELECT submitted_by FROM job_state.job WHERE id = :al;
SET ROLE regress_js_renamed;
SELECT job_id = :al AS still_mine FROM job_state.my_jobs;
RESET ROLE;
DROP ROLE regress_js_renamed;
CREATE ROLE regress_js_renamed IN ROLE regress_js_tenant_a;
SET ROLE regress_js_renamed;
SELECT count(*) AS inherited FROM job_state.my_jobs;
RESET ROLE;
SELECT submitted_by::oid <> 0 AND submitted_by::text ~ '^[0-9]+$' AS dangling_oid
  FROM job_state.job WHERE id = :al;

-- raw SQL on the acl: no privileges for '{}', and no malformed array
UPDATE job_state.queue SET acl = '{}' WHERE name = 'qa';
SET ROLE regress_js_tenant_a;
SELECT job_state.has_queue_privilege('qa', 'read') AS reads_after_empty;
RESET ROLE;
UPDATE job_state.queue SET acl = ARRAY[NULL]::aclitem[] WHERE name = 'qa';
UPDATE job_state.queue SET acl = '{{"regress_js_tenant_a=r/postgres"}}' WHERE name = 'qa';
UPDATE job_state.queue SET acl = NULL WHERE name = 'qa';
SET ROLE regress_js_tenant_a;
SELECT job_state.has_queue_privilege('qa', 'read') AS reads_when_open;
RESET ROLE;

-- bad arguments
SELECT job_state.grant_queue('qa', 'regress_js_tenant_a', 'delete');
SELECT job_state.grant_queue('qa', 'regress_js_tenant_a', VARIADIC '{}'::text[]);
SELECT job_state.grant_queue('qa', 'regress_js_tenant_a', VARIADIC ARRAY[NULL]::text[]);
SELECT job_state.grant_queue('qa', 'regress_js_no_such_role', 'read');
SELECT job_state.grant_queue('nope', 'regress_js_tenant_a', 'read');
SELECT job_state.grant_queue(NULL, 'regress_js_tenant_a', 'read');
SELECT job_state.has_queue_privilege('nope', 'read') IS NULL AS unknown_queue;
SELECT job_state.has_queue_privilege('qa', 'write');
SELECT job_state.has_queue_privilege('regress_js_no_such_role', 'qa', 'read');
SELECT job_state.has_queue_privilege('public', 'qa', 'read') AS public_reads_qa;
-- grant_queue is the owner's
SET ROLE regress_js_tenant_a;
SELECT job_state.grant_queue('qa', 'regress_js_tenant_b', 'read');
RESET ROLE;

SET job_state.drop_live_jobs = on;
DROP OWNED BY regress_js_tenants, regress_js_tenant_a, regress_js_tenant_b, regress_js_renamed;
DROP ROLE regress_js_renamed, regress_js_tenant_a, regress_js_tenant_b, regress_js_tenants;
