# Upgrade from the released 0.1.0 to the current version, with data in
# place.
#
#  1. The released install script is frozen: its sha256 is recorded here.
#  2. A database made at VERSION '0.1.0' gets jobs in every state and rows
#     in every table (queues with limits, a resource with slots and
#     start-rate shards, history, spend, operations, a schedule, a stale
#     refusal), written by the NEW C library through the 0.1.0 SQL: the
#     library must serve the previous version's SQL until the update.
#  3. ALTER EXTENSION job_state UPDATE: the version is the control file's,
#     every row survived as it was (the 0.1.0 columns, compared one by
#     one), tokens issued before the update are still accepted (and a
#     stale one still refused), and a worker connected across the update
#     goes on in the same session.
#  4. The upgraded schema is the schema of a fresh CREATE EXTENSION, by
#     pg_dump --schema-only of both databases, compared with a diff.
#
# A fresh CREATE EXTENSION runs the full install script of the new version
# (sql/job_state--<new>.sql), not the chain, so step 4 compares two
# different scripts: the full one against job_state--0.1.0.sql followed by
# the upgrade scripts, applied with data in place.  Every object, comment,
# privilege, constraint name, default and view definition of one must be
# in the other; and since C code and pg_dump/restore rely on column
# positions, every table's column order must match too (a column the
# upgrade adds with ALTER TABLE ... ADD COLUMN goes last in the full
# script).
use strict;
use warnings;

use Digest::SHA qw(hmac_sha256);
use MIME::Base64 qw(encode_base64);
use File::Basename qw(dirname);
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# the version of job_state.control and META.json
my $new_version = '0.2.0';

# ---- 1. the released script is frozen ------------------------------------

# Every released script and its sha256.  When a version is released, add
# its upgrade script here (sha256sum sql/job_state--A--B.sql).
my %released = (
	'job_state--0.1.0.sql' =>
	  'f98ce2c8bd36239f64456e6048d7bc07dfdc97baf711f963537c1191ea6a2ac3',
);

my $srcdir = dirname(__FILE__) . '/../..';

sub sha256_of
{
	my ($path) = @_;
	return Digest::SHA->new(256)->addfile($path, 'b')->hexdigest;
}

my $node = PostgreSQL::Test::Cluster->new('upgrade');
$node->init;
$node->start;

my $sharedir = $node->config_data('--sharedir');
foreach my $script (sort keys %released)
{
	is(sha256_of("$srcdir/sql/$script"), $released{$script},
		"sql/$script is the released file: released scripts are frozen; "
		  . "put schema changes into sql/job_state--$new_version.sql and "
		  . "the upgrade script sql/job_state--0.1.0--$new_version.sql instead");
	is(sha256_of("$sharedir/extension/$script"), $released{$script},
		"the installed $script is the released file (the test runs what it checked)");
}

# A script left in the server's extension directory by an earlier install
# of another tree (make install copies, it never removes) would change what
# CREATE EXTENSION runs, e.g. a full install script of the new version.
my @tree_scripts = sort map { s{.*/}{}r } glob("$srcdir/sql/job_state--*.sql");
my @installed_scripts =
  sort map { s{.*/}{}r } glob("$sharedir/extension/job_state--*.sql");
is("@installed_scripts", "@tree_scripts",
	"the installed job_state scripts are those of this tree, no more (remove stale ones from $sharedir/extension)");

# CREATE EXTENSION without VERSION runs the full script of the default
# version when there is one: step 4 then compares it with the upgrade path.
ok(-f "$srcdir/sql/job_state--$new_version.sql",
	"sql/job_state--$new_version.sql, the full install script of $new_version, exists");

# ---- helpers --------------------------------------------------------------

my $db = 'upgraded';
$node->safe_psql('postgres', "CREATE DATABASE $db");
$node->safe_psql('postgres', 'CREATE DATABASE fresh');

sub sql
{
	my ($sql, $dbname) = @_;
	return $node->safe_psql($dbname // $db, $sql);
}

# SQLSTATE of a statement expected to fail ('' if it succeeded)
sub sqlstate_of
{
	my ($sql) = @_;
	my ($ret, $stdout, $stderr) =
	  $node->psql($db, "\\set VERBOSITY sqlstate\n$sql");
	return '' if $ret == 0;
	return $stderr =~ /ERROR:\s+([0-9A-Z]{5})/ ? $1 : "unparsed: $stderr";
}

# claim one job of a queue: (token, job id)
sub claim_one
{
	my ($queue, $worker) = @_;
	my $row = sql(
		"SELECT token || '|' || job_id FROM job_state.claim('$queue', '$worker')");
	my ($token, $id) = split /\|/, $row;
	return ($token, $id);
}

sub submit
{
	my ($args) = @_;
	return sql("SELECT job_id FROM job_state.submit($args)");
}

# ---- 2. 0.1.0 with data, written by the new library ------------------------

sql(q{CREATE EXTENSION job_state VERSION '0.1.0'});
is(sql(q{SELECT extversion FROM pg_extension WHERE extname = 'job_state'}),
	'0.1.0', 'the extension was created at 0.1.0');
is( sql(
		q{SELECT path FROM pg_extension_update_paths('job_state')
		   WHERE source = '0.1.0' AND target = } . "'$new_version'"),
	"0.1.0--$new_version",
	"one upgrade script leads from 0.1.0 to $new_version");

sql(q{
	SELECT job_state.create_queue('work', retry_interval => '1 hour',
		max_delay => '1 hour', jitter => 'none', max_retries => 3, concurrency_limit => 20,
		per_key_limit => 5);
	SELECT job_state.create_queue('plain', retry_interval => '0',
		jitter => 'none');
	SELECT job_state.create_resource('gpu', 4, 100);
	SELECT job_state.schedule('nightly', '30 2 * * *', 'plain',
		'{"report": "daily"}');
});
like(sql(q{SELECT count(*) FROM job_state.bucket WHERE resource = 'gpu'}),
	qr/^[1-9]/, 'the resource has start-rate shards');
is(sql(q{SELECT count(*) FROM job_state.slot WHERE kind = 'resource'}),
	'4', 'the resource has its slots');

my %job;      # name => job id
my %token;    # name => token

# succeeded
$job{succeeded} = submit(q{'work', '{"n": 1}', 'k1', resource => 'gpu',
	concurrency_key => 'c1'});
($token{succeeded}) = claim_one('work', 'w1');
is(sql(qq{SELECT (job_state.heartbeat('$token{succeeded}', '10 min')).cancel_requested}),
	'f', 'on the 0.1.0 schema: heartbeat');
sql(qq{SELECT job_state.succeed('$token{succeeded}', '{"ok": true}')});

# failed
$job{failed} = submit(q{'work', '{"n": 2}', 'k2', resource => 'gpu',
	concurrency_key => 'c1'});
($token{failed}) = claim_one('work', 'w1');
is(sql(qq{SELECT job_state.fail('$token{failed}', 'permanent', '{"http": 400}')}),
	'failed', 'on the 0.1.0 schema: fail permanent');

# unknown
$job{unknown} = submit(q{'work', '{"n": 3}', 'k3', resource => 'gpu',
	concurrency_key => 'c2'});
($token{unknown}) = claim_one('work', 'w2');
is(sql(qq{SELECT job_state.fail('$token{unknown}', 'unknown')}),
	'unknown', 'on the 0.1.0 schema: fail unknown');

# waiting for a retry (run_after an hour away)
$job{retry} = submit(q{'work', '{"n": 4}', 'k4', concurrency_key => 'c2'});
($token{retry}) = claim_one('work', 'w2');
is(sql(qq{SELECT job_state.fail('$token{retry}', 'transient', '{"http": 503}')}),
	'accepted', 'on the 0.1.0 schema: fail transient schedules a retry');

# running, with a budget, spend and operations; holds queue, resource and
# key slots
$job{running} = submit(q{'work', '{"n": 5}', 'k5', resource => 'gpu',
	concurrency_key => 'c1', budget => '{"usd": 100}'});
($token{running}) = claim_one('work', 'w3');
is(sql(qq{SELECT job_state.charge('$token{running}', 'usd', 12.5)}),
	'87.5', 'on the 0.1.0 schema: charge');
is(sql(qq{SELECT job_state.reserve('$token{running}', 'usd', 80)}),
	'7.5', 'on the 0.1.0 schema: reserve');
is(sql(qq{SELECT state FROM job_state.begin_operation('$token{running}', 'mail')}),
	'new', 'on the 0.1.0 schema: begin_operation');
sql(qq{SELECT job_state.finish_operation('$token{running}', 'mail', '{"id": "m-1"}')});
is(sql(qq{SELECT state FROM job_state.begin_operation('$token{running}', 'sms')}),
	'new', 'a second operation, left started');

# running, to be failed after the update
$job{running2} = submit(q{'work', '{"n": 6}', 'k6'});
($token{running2}) = claim_one('work', 'w4');

# cancelled while waiting
$job{cancelled} = submit(q{'work', '{"n": 8}', 'k8'});
is(sql(qq{SELECT job_state.cancel($job{cancelled}, 'withdrawn')}),
	't', 'on the 0.1.0 schema: cancel');

# reconciled: unknown -> succeeded
$job{reconciled} = submit(q{'plain', '{"n": 9}', 'p1'});
($token{reconciled}) = claim_one('plain', 'w5');
sql(qq{
	SELECT job_state.fail('$token{reconciled}', 'unknown');
	SELECT job_state.reconcile($job{reconciled}, 'succeeded', '{"checked": true}');
});

# failed, redriven and claimed again: its first token is stale, and its
# refusal is counted
$job{redriven} = submit(q{'plain', '{"n": 10}', 'p2'});
($token{stale}) = claim_one('plain', 'w6');
sql(qq{
	SELECT job_state.fail('$token{stale}', 'permanent');
	SELECT job_state.redrive($job{redriven}, extra_attempts => 1);
});
($token{redriven}) = claim_one('plain', 'w6');
is(sqlstate_of(qq{SELECT job_state.succeed('$token{stale}')}),
	'JS001', 'on the 0.1.0 schema: a stale token is refused');

# running with a cancel request
$job{cancelling} = submit(q{'plain', '{"n": 11}', 'p3'});
($token{cancelling}) = claim_one('plain', 'w7');
is(sql(qq{SELECT job_state.cancel($job{cancelling})}), 't',
	'a running job asked to stop');

# waiting, never claimed (submitted last so that no claim above took it)
$job{accepted} = submit(q{'work', '{"n": 7}', 'k7', priority => 5});

# succeed_many on the 0.1.0 schema, for a job of its own
$job{batch} = submit(q{'plain', '{"n": 12}', 'p4'});
($token{batch}) = claim_one('plain', 'w8');
is(sql(qq{SELECT outcome FROM job_state.succeed_many(ARRAY['$token{batch}']::job_state.claim_token[])}),
	'succeeded', 'on the 0.1.0 schema: succeed_many');

# a worker connected across the update: its backend has prepared and kept
# its plans (submit, claim, heartbeat, succeed) on the 0.1.0 schema, and
# holds a claim while the update runs
my $worker = $node->background_psql($db);
$worker->query_safe(q{SELECT job_id FROM job_state.submit('plain', '{"n": 13}', 'p5')});
$worker->query_safe(q{SELECT job_state.succeed(token) FROM job_state.claim('plain', 'live')});
$job{live} = submit(q{'plain', '{"n": 14}', 'p6'});
$token{live} = $worker->query_safe(q{SELECT token FROM job_state.claim('plain', 'live')});
is($worker->query_safe(qq{SELECT cancel_requested FROM job_state.heartbeat('$token{live}')}),
	'f', 'a connected worker holds a claim on the 0.1.0 schema');

# a job without a key: the 0.1.0 column input_hash is NOT NULL, so the new
# library still hashes its input there (0.2.0 leaves it NULL)
sql(q{SELECT job_state.create_queue('keyless')});
my $keyless = submit(q{'keyless', '{"n": 16}'});
is(sql(qq{SELECT input_hash = sha256(convert_to(input::text, 'UTF8'))
	  FROM job_state.job WHERE id = $keyless}),
	't', 'on the 0.1.0 schema: a job without a key still gets its input hash');
sql(qq{SELECT job_state.cancel($keyless)});

# the new library's wait_for_callback, reached on the 0.1.0 schema (which
# has no SQL function for it and no status waiting), refuses and changes
# nothing
sql(q{CREATE FUNCTION public.wait_for_callback_probe(job_state.claim_token,
	interval, interval, boolean)
	RETURNS TABLE(status job_state.status, callback_timeout_at timestamptz,
		lease_expires_at timestamptz)
	AS '$libdir/job_state', 'js_wait_for_callback' LANGUAGE C});
is(sqlstate_of(qq{SELECT * FROM public.wait_for_callback_probe('$token{running2}',
	'1 hour', NULL, false)}),
	'0A000', 'on the 0.1.0 schema: waiting for a callback is refused');
is(sql(qq{SELECT status FROM job_state.job WHERE id = $job{running2}}),
	'running', 'the refused wait left the job running');
sql(q{DROP FUNCTION public.wait_for_callback_probe(job_state.claim_token,
	interval, interval, boolean)});

is( sql(q{SELECT string_agg(DISTINCT status::text, ',' ORDER BY status::text)
	  FROM job_state.job}),
	'accepted,cancelled,failed,running,succeeded,unknown',
	'jobs in every state');
is(sql(qq{SELECT retries || '|' || (run_after > now() + '30 min')
	  FROM job_state.job WHERE id = $job{retry}}),
	'1|true', 'one job waits for its retry');
cmp_ok(sql(q{SELECT job_state.stale_refusals(id) FROM job_state.queue WHERE name = 'plain'}),
	'>=', 1, 'a stale refusal was counted');
is( sql(
		q{SELECT string_agg(kind || ':' || scope || ':' || key, ',' ORDER BY kind, scope, key)
		    FROM job_state.slot WHERE job_id IS NOT NULL}),
	'key:work:c1,queue:work:,queue:work:,resource:gpu:',
	'the running jobs hold their slots (queue, resource and key)');

# Every 0.1.0 table, column by column (an upgrade may add columns; these
# must keep their values), and the sequences.
my %snapshot_sql = (
	queue => q{SELECT string_agg(format('%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s',
		name, id, lease, max_lease, retry_interval, backoff_rate, max_retries,
		max_delay, jitter, max_attempts, on_lease_expiry, concurrency_limit,
		per_key_limit, paused, uses_resources, created_at), E'\n' ORDER BY name)
	  FROM job_state.queue},
	job => q{SELECT string_agg(format(
		'%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s',
		queue, id, submitted_by, accepted_at, priority, idempotency_key,
		encode(input_hash, 'hex'), input, resource, concurrency_key,
		max_attempts, deadline, budget, status, generation, attempts, retries,
		throttles, run_after, cancel_requested, queue_slot, resource_slot,
		key_slot, lease_expires_at, started_at, finished_at, worker, result,
		last_error, error_class, reason, spent), E'\n' ORDER BY queue, id)
	  FROM job_state.job},
	job_event => q{SELECT string_agg(format('%s|%s|%s|%s|%s|%s|%s|%s',
		queue, job_id, seq, from_status, to_status, generation, at, detail),
		E'\n' ORDER BY seq)
	  FROM job_state.job_event},
	spend => q{SELECT string_agg(format('%s|%s|%s|%s|%s|%s',
		queue, job_id, generation, meter, amount, at), E'\n' ORDER BY at, job_id)
	  FROM job_state.spend},
	operation => q{SELECT string_agg(format('%s|%s|%s|%s|%s|%s|%s|%s',
		queue, job_id, op_id, state, generation, result, started_at, finished_at),
		E'\n' ORDER BY queue, job_id, op_id)
	  FROM job_state.operation},
	resource => q{SELECT string_agg(format('%s|%s|%s|%s',
		name, concurrency_limit, max_starts_per_second, created_at), E'\n' ORDER BY name)
	  FROM job_state.resource},
	bucket => q{SELECT string_agg(format('%s|%s|%s|%s|%s|%s',
		resource, n, per_second, burst, tokens, refilled_at), E'\n' ORDER BY resource, n)
	  FROM job_state.bucket},
	slot => q{SELECT string_agg(format('%s|%s|%s|%s|%s|%s',
		kind, scope, key, n, queue, job_id), E'\n' ORDER BY kind, scope, key, n)
	  FROM job_state.slot},
	schedule => q{SELECT string_agg(format('%s|%s|%s|%s|%s|%s',
		name, cron, queue, input, last_tick, created_at), E'\n' ORDER BY name)
	  FROM job_state.schedule},
	secret => q{SELECT string_agg(format('%s|%s', created_at, encode(sha256(key), 'hex')),
		E'\n' ORDER BY created_at)
	  FROM job_state.secret},
	sequences => q{SELECT string_agg(format('%s|%s|%s', sequencename, last_value,
		increment_by), E'\n' ORDER BY sequencename)
	  FROM pg_sequences WHERE schemaname = 'job_state'},
);

my %before = map { $_ => sql($snapshot_sql{$_}) } keys %snapshot_sql;
foreach my $table (sort keys %before)
{
	isnt($before{$table}, '', "0.1.0 data: $table has rows");
}
my $events_before = sql(q{SELECT count(*) FROM job_state.job_event});

# ---- 3. the update ----------------------------------------------------------

sql('ALTER EXTENSION job_state UPDATE');
is(sql(q{SELECT extversion FROM pg_extension WHERE extname = 'job_state'}),
	$new_version, "ALTER EXTENSION job_state UPDATE went to $new_version");
is(sql(q{SELECT default_version FROM pg_available_extensions WHERE name = 'job_state'}),
	$new_version, "$new_version is the control file's default_version");

foreach my $table (sort keys %before)
{
	is(sql($snapshot_sql{$table}), $before{$table},
		"every row of $table survived the update as it was");
}

# tokens issued before the update: the MAC secret and the generations are
# as they were
is(sqlstate_of(qq{SELECT job_state.assert_claim('$token{running}')}), '',
	'a token issued before the update is accepted (assert_claim)');
my $hb = sql(qq{SELECT (lease_expires_at > now()) || '|' || cancel_requested
	  FROM job_state.heartbeat('$token{running}', '10 min')});
is($hb, 'true|false', 'a token issued before the update: heartbeat');
is(sql(qq{SELECT job_state.charge('$token{running}', 'usd', 2.5)}),
	'85.0', 'a token issued before the update: charge');
is(sql(qq{SELECT state || '|' || result::text FROM job_state.begin_operation('$token{running}', 'mail')}),
	'done|{"id": "m-1"}', 'an operation done before the update returns its result');
is(sql(qq{SELECT state FROM job_state.begin_operation('$token{running}', 'sms')}),
	'in_doubt', 'an operation started before the update is in doubt');
sql(qq{SELECT job_state.succeed('$token{running}', '{"done": 5}')});
is(sql(qq{SELECT status || '|' || generation FROM job_state.job WHERE id = $job{running}}),
	'succeeded|1', 'a token issued before the update: succeed');
is(sql(qq{SELECT job_state.fail('$token{running2}', 'transient')}),
	'accepted', 'a token issued before the update: fail');
is(sql(qq{SELECT cancel_requested FROM job_state.heartbeat('$token{cancelling}')}),
	't', 'a cancel request made before the update is reported');
is(sql(qq{SELECT job_state.fail('$token{cancelling}', 'transient')}),
	'cancelled', 'and ends the job cancelled');
sql(qq{SELECT job_state.succeed('$token{redriven}')});
is(sqlstate_of(qq{SELECT job_state.succeed('$token{stale}')}),
	'JS001', 'a token stale before the update is still refused');
is(sql(q{SELECT count(*) FROM job_state.slot WHERE job_id IS NOT NULL}),
	'0', 'every slot was freed');

# A token as the 0.1.0 library minted it: a 16-byte MAC of "job_state/1"
# || id || generation || queue and no nonce.  It stands for nonce 0, the
# claim_nonce of every row claimed before the update: accepted until the
# job's next generation, whose claim draws a nonce.
sub legacy_token
{
	my ($id, $generation, $queue_id) = @_;
	my $key = pack('H*', sql(q{SELECT encode(key, 'hex') FROM job_state.secret
		ORDER BY created_at DESC LIMIT 1}));
	my $fields = pack('Q>l>l>', $id, $generation, $queue_id);
	my $mac = substr(hmac_sha256('job_state/1' . $fields, $key), 0, 16);
	my $b64 = encode_base64($fields . $mac, '');
	$b64 =~ tr{+/}{-_};
	$b64 =~ s/=+$//;
	return $b64;
}
$job{legacy} = submit(q{'plain', '{"n": 20}', 'p20'});
sql(qq{SET job_state.restore = on;
	UPDATE job_state.job SET status = 'running', generation = 1, attempts = 1,
		lease_expires_at = now() + interval '1 hour', started_at = now(), worker = 'w0'
	 WHERE id = $job{legacy}});
is(sql(qq{SELECT claim_nonce FROM job_state.job WHERE id = $job{legacy}}), '0',
	'a job claimed before the update holds nonce 0');
my $plain_id = sql(q{SELECT id FROM job_state.queue WHERE name = 'plain'});
my $legacy = legacy_token($job{legacy}, 1, $plain_id);
is(sqlstate_of(qq{SELECT job_state.assert_claim('$legacy')}), '',
	'a token minted by the 0.1.0 library is accepted while its job holds nonce 0');
is(sql(qq{SELECT cancel_requested FROM job_state.heartbeat('$legacy')}), 'f',
	'and acts (heartbeat)');
is(sql(qq{SELECT job_state.fail('$legacy', 'transient')}), 'accepted',
	'and completes (fail)');
my $reclaimed = sql(qq{SELECT token FROM job_state.claim('plain', 'w0')
	 WHERE job_id = $job{legacy}});
isnt(sql(qq{SELECT claim_nonce FROM job_state.job WHERE id = $job{legacy}}), '0',
	'the next claim draws a nonce');
my $legacy2 = legacy_token($job{legacy}, 2, $plain_id);
is(sqlstate_of(qq{SELECT job_state.succeed('$legacy2')}), 'JS001',
	'a 0.1.0-style token for a generation claimed after the update is refused');
my $forged_legacy = legacy_token($job{legacy}, 2, $plain_id + 1);
isnt(sqlstate_of(qq{SELECT job_state.succeed('$forged_legacy')}), '',
	'a 0.1.0-style token of another queue is refused');
sql(qq{SELECT job_state.succeed('$reclaimed')});

# the worker that stayed connected across the update goes on in the same
# backend
is($worker->query_safe(qq{SELECT cancel_requested FROM job_state.heartbeat('$token{live}')}),
	'f', 'a worker connected across the update: heartbeat in the same session');
$worker->query_safe(qq{SELECT job_state.succeed('$token{live}')});
is(sql(qq{SELECT status FROM job_state.job WHERE id = $job{live}}),
	'succeeded', 'a worker connected across the update: succeed in the same session');
$worker->query_safe(q{SELECT job_id FROM job_state.submit('plain', '{"n": 15}', 'p7')});
is( $worker->query_safe(
		q{SELECT job_state.fail(token, 'permanent') FROM job_state.claim('plain', 'live')}),
	'failed', 'and submits, claims and fails new jobs');
$worker->quit;

# the jobs left from 0.1.0 go on; new jobs work as before
sql(qq{SELECT job_state.reconcile($job{unknown}, 'failed')});
is(sql(q{SELECT created FROM job_state.submit('work', '{"n": 1}', 'k1')}),
	'f', 'an idempotency key from 0.1.0 returns its job');
is(sqlstate_of(q{SELECT job_state.submit('work', '{"n": 0}', 'k1')}),
	'JS002', 'and refuses another input');
my ($t, $id) = claim_one('work', 'w9');
is($id, $job{accepted}, 'claim takes the job that waited across the update');
sql(qq{SELECT job_state.succeed('$t')});
my $new = submit(q{'work', '{"n": 100}', 'k100', resource => 'gpu'});
cmp_ok($new, '>', $job{batch}, 'job ids continue after the update');
($t, $id) = claim_one('work', 'w9');
is($id, $new, 'a job submitted after the update is claimed');
sql(qq{SELECT job_state.succeed('$t')});
cmp_ok(sql(q{SELECT count(*) FROM job_state.job_event}), '>', $events_before,
	'history goes on');
is(sqlstate_of(q{UPDATE job_state.job SET status = 'accepted' WHERE status = 'succeeded'}),
	'JS003', 'the state machine still holds');

# ---- 4. upgraded schema = fresh install ------------------------------------

sql('CREATE EXTENSION job_state', 'fresh');
is(sql(q{SELECT extversion FROM pg_extension WHERE extname = 'job_state'}, 'fresh'),
	$new_version, "a fresh CREATE EXTENSION installs $new_version");

# pg_dump --schema-only dumps an extension as one CREATE EXTENSION; in
# --binary-upgrade mode (what pg_upgrade uses) it dumps every member object,
# its membership (ALTER EXTENSION ... ADD) and its initial privileges.
# What is normalised, and why:
#  - \restrict / \unrestrict lines: a random key per run;
#  - binary_upgrade_set_next_* calls: OIDs, relfilenodes and attribute
#    versions, the physical identity pg_upgrade preserves, different in
#    any two databases;
#  - relfrozenxid / relminmxid and the toast table's OID in the UPDATEs of
#    pg_class: transaction ids;
#  - the config-table OIDs of binary_upgrade_create_empty_extension: made
#    names, so which tables pg_dump keeps is still compared;
#  - setval values: where a sequence stands is data, not schema;
#  - binary_upgrade_set_missing_value: the value ADD COLUMN ... DEFAULT
#    stored for the rows then present; a full install script that has the
#    column from the start stores none, and the DEFAULT itself is still
#    compared;
#  - the stale_refusals_<queue id> sequences are left out: create_queue
#    makes one per queue, outside the extension, so they follow the data.
#    (pg_dump -T cannot leave them out: a sequence owned by a column of a
#    dumped table, job_state.queue.id, is always dumped.)
sub schema_dump
{
	my ($dbname) = @_;
	my $file = $node->basedir . "/$dbname.schema.sql";
	$node->command_ok(
		[
			'pg_dump', '--schema-only', '--binary-upgrade',
			'-f', $file, '-d', $node->connstr($dbname)
		],
		"pg_dump --schema-only --binary-upgrade of $dbname");

	my %config = map { split /\|/ } split /\n/, sql(
		q{SELECT string_agg(c::oid || '|' || c::regclass, E'\n')
		    FROM pg_extension, unnest(extconfig) c
		   WHERE extname = 'job_state'}, $dbname);

	# the dump's entries, each from its "-- Name: ...; Type: ..." header
	my @entries = split /^(?=--\n-- (?:Data for )?Name: )/m, slurp_file($file);
	my $text = join '',
	  grep { !/\A--\n-- Name: stale_refusals_\d+; Type: SEQUENCE/ } @entries;
	$text =~ s/^\\(?:un)?restrict .*\n//mg;
	$text =~ s/^SELECT pg_catalog\.binary_upgrade_set_next_\w+\(.*\);\n//mg;
	$text =~ s/relfrozenxid = '\d+', relminmxid = '\d+'/relfrozenxid = <xid>, relminmxid = <mxid>/g;
	$text =~ s/^WHERE oid = '\d+';$/WHERE oid = <oid>;/mg;
	$text =~ s{(binary_upgrade_create_empty_extension\('job_state', [^\n]*?)'\{([\d,]*)\}'}
		{$1 . "'{" . join(',', map { $config{$_} // "<unknown oid $_>" } split /,/, $2) . "}'"}e;
	$text =~ s/\n-- set missing value\.\nSELECT pg_catalog\.binary_upgrade_set_missing_value\(.*\);\n\n//g;
	$text =~ s/^(SELECT pg_catalog\.setval\('[^']+'), \d+, (?:true|false)\);$/$1, <value>);/mg;

	my $normalised = $node->basedir . "/$dbname.schema.normalised.sql";
	open my $fh, '>', $normalised or die "could not write $normalised: $!";
	print $fh $text;
	close $fh;
	return $normalised;
}

my $upgraded_dump = schema_dump($db);
my $fresh_dump = schema_dump('fresh');
like(slurp_file($fresh_dump), qr/^ALTER EXTENSION job_state ADD TABLE job_state\.job;$/m,
	'the dump lists the extension\'s member objects');
my ($stdout, $stderr) = ('', '');
IPC::Run::run([ 'diff', '-u', $fresh_dump, $upgraded_dump ], '>', \$stdout, '2>', \$stderr);
is($stdout, '', 'the upgraded schema is the schema of a fresh install')
  or diag("diff -u fresh upgraded:\n$stdout$stderr");

$node->stop;
done_testing();
