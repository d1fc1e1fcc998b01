# A failover that loses work: an asynchronous standby promoted before it
# received the last claims and submits of its primary.
#
#  - a token of a claim the new primary never saw is refused, before and
#    after the job is claimed again there (the claim nonce, token.c), with
#    the error that says so, and also for heartbeat, begin_operation and
#    fail;
#  - a token of a job whose submit was lost is told the job was lost in a
#    failover (JS008, and not to retry);
#  - a submit on the new primary never reuses an id acknowledged by the old
#    one (timeline.c advances the ids on the first job write of the new
#    timeline), and a by-id call for a lost id says the job was lost.
#
# The standby is stopped before the lost work and started again without a
# primary to stream from, so it replays only what it had received.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 1);
$primary->start;
$primary->safe_psql('postgres', q{
	CREATE EXTENSION job_state;
	SELECT job_state.create_queue('q', retry_interval => '0', jitter => 'none');
	SELECT job_state.submit('q', jsonb_build_object('n', i), 'k' || i)
	  FROM generate_series(1, 3) i;
});
$primary->backup('base');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'base', has_streaming => 1);
$standby->start;
$primary->wait_for_catchup($standby);
is($standby->safe_psql('postgres', q{SELECT count(*) FROM job_state.job}), '3',
	'the standby has the three jobs');

# the standby falls behind: what follows on the primary is lost
$standby->stop('fast');

# a claim the standby never sees (job 1, generation 1)
my ($lost_token, $lost_claim_job) = split /\|/, $primary->safe_psql('postgres',
	q{SELECT token || '|' || job_id FROM job_state.claim('q', 'old-worker')});
is($lost_claim_job, '1', 'job 1 claimed on the old primary');
# submits the standby never sees: past the 32 values a sequence logs ahead
my $lost_ids = $primary->safe_psql('postgres', q{
	SELECT string_agg(job_id::text, ',' ORDER BY job_id)
	  FROM generate_series(4, 60) i,
	       LATERAL job_state.submit('q', jsonb_build_object('n', i), 'k' || i)});
my @lost_ids = split /,/, $lost_ids;
is(scalar(@lost_ids), 57, 'the old primary acknowledged 57 more submits');
my $max_lost = $lost_ids[-1];
# a lost job claimed on the old primary (claims take by priority and age,
# so raise the last one's priority first)
$primary->safe_psql('postgres', qq{
	SELECT job_state.submit('q', '{"n": "urgent"}', 'urgent', priority => 9)});
my ($lost_job_token, $lost_job) = split /\|/, $primary->safe_psql('postgres',
	q{SELECT token || '|' || job_id FROM job_state.claim('q', 'old-worker')});
cmp_ok($lost_job, '>', $max_lost, 'a job submitted and claimed on the old primary');
$max_lost = $lost_job;
$primary->stop('immediate');

# the standby comes back with nothing more to receive, and is promoted
$standby->append_conf('postgresql.conf', "primary_conninfo = ''");
$standby->start;
$standby->promote;
$standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or die 'standby was not promoted';
my $new = $standby;

is($new->safe_psql('postgres',
	q{SELECT string_agg(id || ':' || status || ':' || generation, ',' ORDER BY id) FROM job_state.job}),
	'1:accepted:0,2:accepted:0,3:accepted:0', 'the new primary lost the claim and the submits');

sub sql_error
{
	my ($node, $sql) = @_;
	my ($ret, $out, $err) =
	  $node->psql('postgres', "\\set VERBOSITY verbose\n$sql");
	return $ret == 0 ? '' : $err;
}

# the lost claim's token is ahead of the job
my $err = sql_error($new, qq{SELECT job_state.succeed('$lost_token')});
like($err, qr/JS001/, 'a token of a lost claim ahead of its job: JS001');
like($err, qr/claim of job 1 that issued this token is unknown to this server/,
	'which says the claim is unknown to this server');
unlike($err, qr/moved on/, 'and not that the job moved on');
like($err, qr/do not retry/, 'and not to retry');

# the job is claimed again on the new primary: the same generation
my $new_token = $new->safe_psql('postgres',
	q{SELECT token FROM job_state.claim('q', 'new-worker') WHERE job_id = 1});
isnt($new_token, '', 'job 1 claimed on the new primary');
is($new->safe_psql('postgres', q{SELECT generation FROM job_state.job WHERE id = 1}),
	'1', 'at the generation of the lost claim');
isnt($new_token, $lost_token, 'with another token than the lost claim\'s');
foreach my $call (
	"SELECT job_state.succeed('$lost_token', '{\"by\": \"old\"}')",
	"SELECT * FROM job_state.heartbeat('$lost_token')",
	"SELECT * FROM job_state.begin_operation('$lost_token', 'mail')",
	"SELECT job_state.fail('$lost_token', 'permanent')",
	"SELECT job_state.assert_claim('$lost_token')",
	"SELECT * FROM job_state.succeed_many(ARRAY['$lost_token']::job_state.claim_token[])")
{
	$err = sql_error($new, $call);
	if ($call =~ /succeed_many/)
	{
		is($new->safe_psql('postgres', $call), "$lost_token|stale",
			'succeed_many reports the lost claim\'s token stale');
		next;
	}
	like($err, qr/JS001.*unknown to this server/s,
		"the lost claim's token is refused at the same generation: " . ($call =~ /job_state\.(\w+)/)[0]);
}
is($new->safe_psql('postgres',
	q{SELECT status || ':' || worker || ':' || (result IS NULL) FROM job_state.job WHERE id = 1}),
	'running:new-worker:true', 'the new claim is untouched');
$new->safe_psql('postgres', qq{SELECT job_state.succeed('$new_token', '{"by": "new"}')});
is($new->safe_psql('postgres', q{SELECT result->>'by' FROM job_state.job WHERE id = 1}),
	'new', 'the new claim completes');

# the token of a job whose submit was lost
$err = sql_error($new, qq{SELECT job_state.succeed('$lost_job_token')});
like($err, qr/JS008/, 'a token of a lost job: JS008');
like($err, qr/lost in a failover/, 'which says the job was lost in a failover');
like($err, qr/Do not retry/, 'and not to retry');

# ids after the promotion never reuse an acknowledged one
my $after = $new->safe_psql('postgres', q{
	SELECT string_agg(job_id::text, ',' ORDER BY job_id)
	  FROM generate_series(1, 40) i,
	       LATERAL job_state.submit('q', jsonb_build_object('after', i))});
my @after = split /,/, $after;
cmp_ok($after[0], '>', $max_lost,
	'the first id submitted on the new primary is above every id the old one acknowledged');
is($new->safe_psql('postgres', q{SELECT count(*) FROM job_state.timeline}), '2',
	'the new timeline is recorded');
# a by-id call for an id the old primary acknowledged
$err = sql_error($new, "SELECT job_state.cancel($lost_ids[-1])");
like($err, qr/JS008.*lost in a failover/s,
	'a by-id call for an id lost in the failover says so');
# a second write on the same timeline does not jump again
my $next = $new->safe_psql('postgres',
	q{SELECT job_id FROM job_state.submit('q', '{"after": 41}')});
is($next, $after[-1] + 1, 'ids go on one by one on the new timeline');

$new->stop;
done_testing();
