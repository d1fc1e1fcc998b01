
# Limits under load: many claimers of one queue with a concurrency limit, a
# per-key limit and a shared resource, claiming, succeeding, failing
# (transient: retried) and claiming again for several seconds, while
# another session samples what is running.  No snapshot may ever show
# more running jobs than a limit allows, and at the end every running job
# holds exactly its slots and no slot is held by a job that does not run.

use strict;
use warnings;

use IPC::Run;
use Time::HiRes qw(usleep);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('limits');
$node->init;
$node->append_conf('postgresql.conf', 'max_connections = 40');
$node->start;

my $queue_limit = 4;
my $key_limit = 1;
my $resource_limit = 2;
my $njobs = 3000;

$node->safe_psql(
	'postgres', qq{
	CREATE EXTENSION job_state;
	SELECT job_state.create_queue('lim', concurrency_limit => $queue_limit,
								  per_key_limit => $key_limit,
								  retry_interval => '0 s', max_retries => 1000);
	SELECT job_state.create_resource('gpu', $resource_limit);
	SELECT pg_catalog.count(*) FROM (
		SELECT job_state.submit('lim', pg_catalog.jsonb_build_object('i', i),
			concurrency_key => 'k' || (i % 6),
			resource => CASE WHEN i % 3 = 0 THEN 'gpu' END)
		  FROM pg_catalog.generate_series(1, $njobs) i) s;
});

# claim one job, hold it a moment, then succeed it or fail it transiently
my $script = $node->basedir . '/limit_cycle.sql';
open my $fh, '>', $script or die "could not write $script: $!";
print $fh <<'EOS';
\set fail random(1, 4)
SELECT count(*) AS got, coalesce(max(token::text), '') AS token FROM job_state.claim('lim', 'w' || :client_id) \gset
\if :got
SELECT pg_catalog.pg_sleep(0.002);
\if :fail = 1
SELECT job_state.fail(':token', 'transient', '{"why": "stress"}');
\else
SELECT job_state.succeed(':token');
\endif
\endif
EOS
close $fh;

my ($out, $err) = ('', '');
my $pgbench = IPC::Run::start(
	[
		'pgbench', '-n', '-c', '12', '-j', '2', '-T', '12',
		'-f', $script, '-h', $node->host, '-p', $node->port, 'postgres'
	],
	'>', \$out, '2>', \$err);

# sample the running jobs until pgbench is done
my ($samples, $worst_queue, $worst_key, $worst_resource, $busy) = (0, 0, 0, 0, 0);
while ($pgbench->pumpable)
{
	my $row = $node->safe_psql(
		'postgres', q{
		SELECT pg_catalog.count(*),
			   coalesce((SELECT pg_catalog.max(c) FROM (SELECT pg_catalog.count(*) AS c
				  FROM job_state.job WHERE queue = 'lim' AND status = 'running'
				 GROUP BY concurrency_key) k), 0),
			   pg_catalog.count(*) FILTER (WHERE resource = 'gpu')
		  FROM job_state.job WHERE queue = 'lim' AND status = 'running'});
	my ($running, $per_key, $on_gpu) = split /\|/, $row;
	$samples++;
	$busy++ if $running > 0;
	$worst_queue = $running if $running > $worst_queue;
	$worst_key = $per_key if $per_key > $worst_key;
	$worst_resource = $on_gpu if $on_gpu > $worst_resource;
	$pgbench->pump_nb;
	usleep(20_000);
}
$pgbench->finish;
is($pgbench->result(0), 0, 'pgbench ran to its end') or diag($err);
like($out, qr/number of failed transactions: 0 /, 'no pgbench transaction failed');
unlike($err, qr/ERROR/, 'no claim, succeed or fail raised an error');

diag("limits under load: $samples samples, at most $worst_queue running "
	  . "(limit $queue_limit), $worst_key per key (limit $key_limit), "
	  . "$worst_resource on the resource (limit $resource_limit)");
cmp_ok($samples, '>', 20, "sampled the running jobs ($samples times)");
cmp_ok($busy, '>', 0, 'jobs were running while sampled');
cmp_ok($worst_queue, '<=', $queue_limit,
	"never more than $queue_limit running (saw $worst_queue)");
cmp_ok($worst_key, '<=', $key_limit,
	"never more than $key_limit running per key (saw $worst_key)");
cmp_ok($worst_resource, '<=', $resource_limit,
	"never more than $resource_limit running on the resource (saw $worst_resource)");

my $done = $node->safe_psql('postgres',
	q{SELECT pg_catalog.count(*) FROM job_state.job WHERE status = 'succeeded'});
cmp_ok($done, '>', 100, "jobs went through ($done succeeded)");
my $retried = $node->safe_psql('postgres',
	q{SELECT pg_catalog.count(*) FROM job_state.job WHERE attempts > 1});
cmp_ok($retried, '>', 0, "transient failures were claimed again ($retried jobs)");

# after the run: held slots match the running jobs exactly
is( $node->safe_psql(
		'postgres', q{
		SELECT pg_catalog.count(*) FROM job_state.slot s
		  LEFT JOIN job_state.job j ON j.id = s.job_id AND j.status = 'running'
		 WHERE s.job_id IS NOT NULL AND j.id IS NULL}),
	'0',
	'no slot is held by a job that does not run');
is( $node->safe_psql(
		'postgres', q{
		SELECT pg_catalog.count(*) FROM job_state.job j
		 WHERE j.status = 'running' AND (
			   (SELECT pg_catalog.count(*) FROM job_state.slot s
				 WHERE s.job_id = j.id AND s.kind = 'queue'
				   AND s.n = j.queue_slot) <> 1
			OR (SELECT pg_catalog.count(*) FROM job_state.slot s
				 WHERE s.job_id = j.id AND s.kind = 'key'
				   AND s.n = j.key_slot) <> 1
			OR (SELECT pg_catalog.count(*) FROM job_state.slot s
				 WHERE s.job_id = j.id AND s.kind = 'resource'
				   AND s.n = j.resource_slot)
			   <> (j.resource IS NOT NULL)::int)}),
	'0',
	'every running job holds one slot of each limit that applies to it, the one its row records');

# the jobs the load left running lose their leases: their slots come back
$node->safe_psql('postgres', q{
	UPDATE job_state.job SET lease_expires_at = pg_catalog.now()
	 WHERE queue = 'lim' AND status = 'running'});
$node->safe_psql('postgres', 'SELECT job_state.sweep()');
is( $node->safe_psql(
		'postgres', q{
		SELECT pg_catalog.count(*) FROM job_state.slot WHERE job_id IS NOT NULL}),
	'0',
	'expired leases gave their slots back');

$node->stop;
done_testing();
