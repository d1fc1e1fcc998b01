# High availability: a committed job survives promotion of a streaming
# standby, and tokens issued before the failover stay fenced by generation
# (the MAC secret and the generations are replicated like any other row).
# Both servers preload job_state: the background workers stay off while
# the standby is in recovery and start on it once it is promoted.  A claim
# the standby never received: test/t/018_lost_claim.pl.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 1);
$primary->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'job_state'
job_state.database = 'postgres'
});
$primary->start;
$primary->safe_psql('postgres', q{
	CREATE EXTENSION job_state;
	SELECT job_state.create_queue('q', on_lease_expiry => 'retry',
		retry_interval => '0', jitter => 'none');
	SELECT job_state.submit('q', jsonb_build_object('n', i), 'k' || i)
	  FROM generate_series(1, 2) i;
});
$primary->backup('base');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'base', has_streaming => 1);
$standby->start;

my $t1 = $primary->safe_psql('postgres',
	q{SELECT token FROM job_state.claim('q', 'w1')});
my $t2 = $primary->safe_psql('postgres',
	q{SELECT token FROM job_state.claim('q', 'w2')});
# t2's lease expires and the job is claimed again: t2 is stale
$primary->safe_psql('postgres', qq{
	UPDATE job_state.job SET lease_expires_at = clock_timestamp() - interval '1 s'
	 WHERE id = job_state.token_job('$t2');
});
my $t3 = $primary->safe_psql('postgres',
	q{SELECT token FROM job_state.claim('q', 'w3')});
is($primary->safe_psql('postgres', qq{SELECT job_state.token_job('$t3') = job_state.token_job('$t2')}),
	't', 'the expired job was claimed again');
$primary->wait_for_catchup($standby);

# the standby refuses writes but has every job
my ($ret, $out, $err) = $standby->psql('postgres',
	qq{SELECT job_state.succeed('$t1')});
like($err, qr/read-only/, 'a standby refuses completions');
is($standby->safe_psql('postgres', q{SELECT count(*) FROM job_state.job}), '2',
	'the standby has every job');

my $workers = q{SELECT string_agg(backend_type, ',' ORDER BY backend_type)
  FROM pg_stat_activity WHERE backend_type LIKE 'job_state %'};
$primary->poll_query_until('postgres', $workers,
	'job_state notifier,job_state sweeper')
  or die 'the primary runs no sweeper and notifier';
is($standby->safe_psql('postgres', $workers), '',
	'no background worker of job_state runs on the standby in recovery');

$primary->stop('immediate');
$standby->promote;
$standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or die 'standby was not promoted';
ok($standby->poll_query_until('postgres', $workers,
		'job_state notifier,job_state sweeper'),
	'the sweeper and the notifier start on the promoted standby');

is($standby->safe_psql('postgres',
	q{SELECT string_agg(status || ':' || generation, ',' ORDER BY id) FROM job_state.job}),
	'running:1,running:2', 'jobs and generations survived promotion');

# the current token works on the new primary, the stale one is refused
$standby->safe_psql('postgres', qq{SELECT job_state.succeed('$t1', '{"after": "failover"}')});
($ret, $out, $err) = $standby->psql('postgres', qq{SELECT job_state.succeed('$t2')});
like($err, qr/claimed again by a newer worker/, 'a token stale before the failover stays stale');
$standby->safe_psql('postgres', qq{SELECT job_state.succeed('$t3')});
is($standby->safe_psql('postgres',
	q{SELECT string_agg(status::text, ',' ORDER BY id) FROM job_state.job}),
	'succeeded,succeeded', 'completions after the failover');
# a forged token is still refused (the secret came along)
my $forged = substr($t3, 0, 42) . (substr($t3, 42, 1) eq 'A' ? 'Q' : 'A');
($ret, $out, $err) = $standby->psql('postgres', qq{SELECT job_state.succeed('$forged')});
like($err, qr/claim token is not valid/, 'forged tokens are refused on the new primary');
# and the idempotent submit remembers its keys
is($standby->safe_psql('postgres',
	q{SELECT job_id || ':' || created FROM job_state.submit('q', '{"n": 1}', 'k1')}),
	'1:false', 'idempotency keys survived the failover');

$standby->stop;
done_testing();
