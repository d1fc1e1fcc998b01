
# Crash and restart: nothing committed is lost, nothing uncommitted
# survives, generations never go back, and tokens issued before the crash
# stay fenced by generation.
#
# The node does not preload job_state, so nothing but our own sweep() and
# claim() applies lease expiry: right after the restart the claimed jobs are
# still running, whatever the clock says.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('crash');
$node->init;
$node->start;

# rows of a query as array refs (psql -At output)
sub rows
{
	my ($sql) = @_;
	my $out = $node->safe_psql('postgres', $sql);
	return [ map { [ split /\|/, $_, -1 ] } grep { $_ ne '' } split /\n/, $out ];
}

# one value
sub value
{
	my ($sql) = @_;
	return $node->safe_psql('postgres', $sql);
}

# SQLSTATE of a statement that is expected to fail ('' if it succeeded)
sub sqlstate_of
{
	my ($sql) = @_;
	my ($ret, $stdout, $stderr) =
	  $node->psql('postgres', "\\set VERBOSITY sqlstate\n$sql");
	return '' if $ret == 0;
	return $stderr =~ /ERROR:\s+([0-9A-Z]{5})/ ? $1 : "unparsed: $stderr";
}

# every job: id => "status|generation|attempts"
sub job_states
{
	my %h = map { $_->[0] => "$_->[1]|$_->[2]|$_->[3]" } @{
		rows(
			'SELECT id, status, generation, attempts FROM job_state.job ORDER BY id'
		) };
	return \%h;
}

my $njobs = 20;

$node->safe_psql(
	'postgres', qq{
	CREATE EXTENSION job_state;
	SELECT job_state.create_queue('crash', lease => '2 s',
		retry_interval => '0', max_delay => '0', jitter => 'none');
	SELECT job_state.submit('crash', pg_catalog.jsonb_build_object('n', i),
		idempotency_key => 'k' || i)
	  FROM pg_catalog.generate_series(1, $njobs) i;
	-- priority 1: claimed before the others
	SELECT job_state.submit('crash', '{"n": 0}', idempotency_key => 'redo',
		priority => 1);
	CHECKPOINT;
});
my $redo = value(
	"SELECT id FROM job_state.job WHERE idempotency_key = 'redo'");

# the redo job: claimed (generation 1), failed transiently (requeued at
# once), claimed again (generation 2), so its first token is stale
my $old_token =
  value("SELECT token FROM job_state.claim('crash', 'w0', max_jobs => 1)");
is(value("SELECT job_state.fail('$old_token', 'transient')"),
	'accepted', 'transient failure requeues the redo job');

# claim five: the redo job again, then the first four of the others
my %token;
my %generation;
foreach my $r (
	@{
		rows(
			"SELECT job_id, job_state.token_generation(token), token
			   FROM job_state.claim('crash', 'w1', max_jobs => 5)")
	})
{
	$generation{ $r->[0] } = $r->[1];
	$token{ $r->[0] } = $r->[2];
}
is(scalar(keys %token), 5, 'claimed five jobs');
is($generation{$redo}, 2, 'the redo job was claimed a second time');
ok(!(grep { $_ != $redo && $generation{$_} != 1 } keys %generation),
	'the other claimed jobs are at generation 1');

# in flight at the crash: a claim and a submit that never commit
my $ghost = $node->background_psql('postgres');
$ghost->query_safe('BEGIN');
my $ghost_claimed = $ghost->query_safe(
	"SELECT pg_catalog.count(*) FROM job_state.claim('crash', 'ghost', max_jobs => 3)"
);
is($ghost_claimed, 3, 'an uncommitted claim holds three jobs');
$ghost->query_safe(
	"SELECT job_state.submit('crash', '{\"n\": -1}', idempotency_key => 'ghost')");

my $before = job_states();
my $events_before = value('SELECT pg_catalog.count(*) FROM job_state.job_event');
is(scalar(keys %$before), $njobs + 1, 'all jobs are there before the crash');

$node->stop('immediate');
# the ghost session lost its server; its psql may already be gone
eval { $ghost->quit; };
$node->start;

# nothing committed is lost, nothing uncommitted came back
my $after = job_states();
is_deeply($after, $before,
	'every job has the same status, generation and attempts after the crash');
is(value('SELECT pg_catalog.count(*) FROM job_state.job_event'),
	$events_before, 'the job history is intact');
is( value(
		"SELECT pg_catalog.count(*) FROM job_state.job
		  WHERE idempotency_key = 'ghost' OR worker = 'ghost'"),
	0,
	'the uncommitted submit and claim are gone');
is( value(
		"SELECT pg_catalog.string_agg(status || ':' || generation, ',' ORDER BY id)
		   FROM job_state.job WHERE id = ANY ('{" . join(',', keys %token) . "}')"),
	join(',', map { "running:$generation{$_}" } sort { $a <=> $b } keys %token),
	'the claimed jobs are still running with the same generations');
is( value(
		"SELECT pg_catalog.count(*) FROM job_state.job
		  WHERE status = 'accepted' AND generation = 0"),
	$njobs - 4,
	'the other jobs are still waiting, never started');

# the leases run out; sweep turns the claimed jobs unknown, never failed
$node->poll_query_until('postgres',
	"SELECT pg_catalog.bool_and(lease_expires_at < pg_catalog.clock_timestamp())
	   FROM job_state.job WHERE status = 'running'")
  or die 'timed out waiting for the leases to run out';
is(value('SELECT job_state.sweep()'), 5, 'sweep moved the five claimed jobs');
is( value(
		"SELECT pg_catalog.string_agg(DISTINCT status || '/' || reason, ',')
		   FROM job_state.job WHERE id = ANY ('{" . join(',', keys %token) . "}')"),
	'unknown/lease_expired',
	'the claimed jobs are unknown (lease_expired)');
is(value("SELECT pg_catalog.count(*) FROM job_state.job WHERE status = 'failed'"),
	0, 'no job failed');

my $swept = job_states();
ok( !(grep {
			  (split /\|/, $swept->{$_})[1] < (split /\|/, $before->{$_})[1]
		} keys %$before),
	'no generation went back');

# late completions with tokens from before the crash
is(sqlstate_of("SELECT job_state.succeed('$old_token')"),
	'JS001', 'the stale token of the redo job is refused (JS001)');
is(value("SELECT status FROM job_state.job WHERE id = $redo"),
	'unknown', 'the refused succeed changed nothing');
is(sqlstate_of("SELECT job_state.succeed('$token{$redo}')"),
	'', 'the current token of the redo job is accepted');
my ($first) = sort { $a <=> $b } grep { $_ != $redo } keys %token;
is(sqlstate_of("SELECT job_state.succeed('$token{$first}', '{\"late\": true}')"),
	'', 'a token from before the crash still completes its unknown job');
is( value(
		"SELECT status || ':' || generation FROM job_state.job
		  WHERE id IN ($redo, $first) ORDER BY id"),
	"succeeded:$generation{$first}\nsucceeded:$generation{$redo}",
	'both late completions resolved unknown to succeeded');
is(sqlstate_of("SELECT job_state.succeed('$old_token')"),
	'JS001', 'the stale token is still refused once the job succeeded');

# a second crash keeps the outcomes
my $final = job_states();
$node->stop('immediate');
$node->start;
is_deeply(job_states(), $final, 'the second crash lost nothing');
ok( !(grep {
			  (split /\|/, $final->{$_})[1] < (split /\|/, $before->{$_})[1]
		} keys %$before),
	'generations only moved forward across both crashes');

$node->stop;
done_testing();
