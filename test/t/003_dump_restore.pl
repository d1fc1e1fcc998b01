# pg_dump / restore of a database with jobs in every state: the rows come
# back as they were (job_state.restore lets the replay write them), the
# MAC secret survives so old tokens stay valid, and the rules hold again
# afterwards.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('dump');
$node->init;
$node->start;

$node->safe_psql('postgres', 'CREATE DATABASE src');
$node->safe_psql('postgres', 'CREATE DATABASE dst');
$node->safe_psql('src', q{
	CREATE EXTENSION job_state;
	SELECT job_state.create_queue('q', retry_interval => '0', jitter => 'none',
		concurrency_limit => 5);
	SELECT job_state.create_resource('api', NULL, 3);
	SELECT job_state.submit('q', jsonb_build_object('n', i), 'key-' || i,
		budget => '{"usd": 100}')
	  FROM generate_series(1, 7) i;
});

# one job per state
my @tokens = split /\n/, $node->safe_psql('src',
	q{SELECT token FROM job_state.claim('q', 'w', max_jobs => 6)});
is(scalar @tokens, 5, 'claimed up to the concurrency limit');
$node->safe_psql('src', qq{
	SELECT job_state.succeed('$tokens[0]', '{"ok": 1}');
	SELECT job_state.fail('$tokens[1]', 'permanent');
	SELECT job_state.fail('$tokens[2]', 'unknown');
	SELECT job_state.cancel(job_state.token_job('$tokens[3]'));
	SELECT job_state.charge('$tokens[4]', 'usd', 12.5);
	SELECT job_state.begin_operation('$tokens[4]', 'mail');
	SELECT job_state.cancel(7);
});
my $running_token = $tokens[4];

my $snapshot = q{
	SELECT string_agg(format('%s|%s|%s|%s|%s|%s|%s|%s|%s', id, queue, status,
		generation, attempts, idempotency_key, encode(input_hash, 'hex'),
		spent, queue_slot, resource_slot, key_slot), E'\n' ORDER BY id)
	  FROM job_state.job};
my $events = q{SELECT count(*) || '/' || max(seq) FROM job_state.job_event};
my $buckets = q{
	SELECT string_agg(format('%s|%s|%s|%s|%s|%s', resource, n, per_second, burst,
		tokens, refilled_at), E'\n' ORDER BY resource, n)
	  FROM job_state.bucket};
my $before = $node->safe_psql('src', $snapshot);
my $events_before = $node->safe_psql('src', $events);
my $buckets_before = $node->safe_psql('src', $buckets);
like($buckets_before, qr/^api\|3\|/m, 'a resource with a start rate has its shards');
like($before, qr/\|succeeded\|/, 'a succeeded job');
like($before, qr/\|running\|/, 'a running job');
like($before, qr/\|unknown\|/, 'an unknown job');

my $dump = $node->basedir . '/src.sql';
$node->command_ok([ 'pg_dump', '-d', $node->connstr('src'), '-f', $dump ],
	'pg_dump of a database with jobs');

# without job_state.restore the replay is refused by the rules
my ($ret, $out, $err) = $node->psql('dst', undef,
	extra_params => [ '-v', 'ON_ERROR_STOP=1', '-f', $dump ]);
isnt($ret, 0, 'plain replay is refused');
like($err, qr/cannot be inserted as|must be inserted with/, 'by the job trigger');
like($err, qr/HINT:  .*PGOPTIONS='-c job_state\.restore=on' pg_restore/,
	'whose hint names the setting that lets the replay through');
$node->safe_psql('postgres', 'DROP DATABASE dst');
$node->safe_psql('postgres', 'CREATE DATABASE dst');

{
	local $ENV{PGOPTIONS} = '-c job_state.restore=on';
	$node->command_ok(
		[ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('dst'), '-f', $dump ],
		'replay with job_state.restore = on');
}

is($node->safe_psql('dst', $snapshot), $before, 'every job came back as it was');
is($node->safe_psql('dst', $events), $events_before, 'the history came back, once');
is($node->safe_psql('dst', q{SELECT count(*) FROM job_state.operation}), '1',
	'operations came back');
is($node->safe_psql('dst', $buckets), $buckets_before,
	'the start-rate shards came back as they were, not made again');
is($node->safe_psql('dst', q{SELECT count(*) FROM job_state.slot WHERE job_id IS NOT NULL}),
	'2', 'the running jobs still hold their slots');

# the MAC secret survived: the running job's old token works on the copy
is($node->safe_psql('dst', qq{SELECT job_state.charge('$running_token', 'usd', 1)}),
	'86.5', 'an old token is still valid after the restore');
$node->safe_psql('dst', qq{SELECT job_state.succeed('$running_token')});
is($node->safe_psql('dst', q{SELECT count(*) FROM job_state.slot WHERE job_id IS NOT NULL}),
	'1', 'its slot was freed');

# idempotency keys, sequences and rules hold after the restore
is($node->safe_psql('dst',
	q{SELECT created FROM job_state.submit('q', '{"n": 1}', 'key-1')}),
	'f', 'an old idempotency key still returns its job');
my $new = $node->safe_psql('dst', q{SELECT job_id FROM job_state.submit('q', '{"n": 99}')});
cmp_ok($new, '>', 7, 'new ids continue after the restored ones');
($ret, $out, $err) = $node->psql('dst',
	q{UPDATE job_state.job SET status = 'accepted' WHERE status = 'succeeded'});
like($err, qr/JS003|cannot change/, 'the state machine holds again');
is($node->safe_psql('dst',
	q{SELECT count(*) FROM job_state.claim('q', 'w', max_jobs => 10)}), '2',
	'claim works on the restored queue');

$node->stop;
done_testing();
