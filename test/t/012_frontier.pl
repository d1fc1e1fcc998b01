
# The claim frontier under a pinned xmin horizon, and its fallbacks.
#
# A session left idle in a transaction pins the horizon: vacuum removes no
# index entry of a claimed job.  Four workers then each submit a job, claim
# one and succeed it, 2,400 times in all, so the queue is nearly empty and
# most claims find only the job just submitted.  With the shared frontier (job_state preloaded) a claim reads the
# entries of the ready index that the last claims left dead only about
# once; with job_state.claim_frontiers = 0 (the per-session marks) each
# claim reads many of them.  pg_stat_user_indexes.idx_tup_read of job_ready
# counts the entries read, so the test can tell the two apart.
#
# Then the fallbacks that keep the frontier's promise: a job made ready by
# a prepared transaction (its outcome comes later, in another session)
# turns frontiers off, and is claimed after COMMIT PREPARED; with fewer
# frontiers than queues each queue's claims still come in order; no job is
# ever left behind.

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $claims_per_worker = 600;
my $workers = 4;

my $node = PostgreSQL::Test::Cluster->new('frontier');
$node->init;
$node->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'job_state'
max_prepared_transactions = 4
autovacuum_naptime = 1
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION job_state');

my $script = $node->basedir . '/claim_succeed.sql';
open my $fh, '>', $script or die "could not write $script: $!";
print $fh <<'EOS';
SELECT job_state.submit('f', '{"n": 1}') \gset
SELECT count(*) AS got, coalesce(max(token::text), '') AS token FROM job_state.claim('f', 'w' || :client_id) \gset
\if :got
SELECT job_state.succeed(':token');
\endif
EOS
close $fh;

# Drop and create the extension again, then run $sql.  The sweeper's
# round (job_state is preloaded here, and the sweeper serves this database)
# takes its tables' locks in another order than DROP EXTENSION, so the two
# can deadlock, above all in the sweeper's first round after a restart; the
# deadlock detector then cancels one of them, and a drop refused that way is
# tried again, as an operator would.
sub recreate_extension
{
	my ($sql) = @_;

	for my $try (1 .. 5)
	{
		my ($ret, $out, $err) = $node->psql(
			'postgres', qq{
			SET job_state.drop_live_jobs = on;
			DROP EXTENSION job_state;
			CREATE EXTENSION job_state;
			$sql},
			on_error_stop => 1);
		return $out if $ret == 0;
		die "recreating the extension failed: $err"
		  unless $err =~ /deadlock detected/ && $try < 5;
		note "DROP EXTENSION met the sweeper's round (deadlock), trying again";
	}
}

# entries of job_ready read per claim while the horizon is pinned
sub reads_per_claim
{
	my ($label) = @_;

	recreate_extension(q{SELECT job_state.create_queue('f');});

	my $pin = $node->background_psql('postgres');
	$pin->query_safe('BEGIN');
	$pin->query_safe('SELECT pg_catalog.txid_current()');

	my $before = $node->safe_psql('postgres',
		q{SELECT idx_tup_read FROM pg_catalog.pg_stat_user_indexes
		   WHERE indexrelid = 'job_state.job_ready'::pg_catalog.regclass});
	my ($out, $err) = ('', '');
	my $pgbench = IPC::Run::run(
		[
			'pgbench', '-n', '-c', $workers, '-j', '2',
			'-t', $claims_per_worker, '-f', $script,
			'-h', $node->host, '-p', $node->port, 'postgres'
		],
		'>', \$out, '2>', \$err);
	ok($pgbench, "$label: pgbench ran to its end") or diag($err);
	unlike($err, qr/ERROR/, "$label: no claim or succeed raised an error");

	# the statistics of the workers' backends reach the shared stats when
	# they exit; ask for a fresh snapshot of them
	my $claims = $node->safe_psql('postgres',
		q{SELECT pg_catalog.count(*) FROM job_state.job WHERE status = 'succeeded'});
	my $after;
	$node->poll_query_until(
		'postgres', qq{
		SELECT idx_tup_read > $before FROM pg_catalog.pg_stat_user_indexes
		 WHERE indexrelid = 'job_state.job_ready'::pg_catalog.regclass});
	$after = $node->safe_psql('postgres',
		q{SELECT idx_tup_read FROM pg_catalog.pg_stat_user_indexes
		   WHERE indexrelid = 'job_state.job_ready'::pg_catalog.regclass});
	my $dead = $node->safe_psql('postgres',
		q{SELECT n_dead_tup FROM pg_catalog.pg_stat_user_tables
		   WHERE relid = 'job_state.job'::pg_catalog.regclass});
	$pin->query_safe('COMMIT');
	$pin->quit;

	cmp_ok($claims, '>=', 0.9 * $workers * $claims_per_worker,
		"$label: claims took the jobs submitted ($claims)");
	my $per_claim = ($after - $before) / $claims;
	diag(sprintf("%s: %d claims read %d entries of job_ready (%.1f per claim), %s dead tuples",
			$label, $claims, $after - $before, $per_claim, $dead));
	return $per_claim;
}

my $shared = reads_per_claim('shared frontier');
cmp_ok($shared, '<=', 10, 'with the frontier a claim reads at most 10 entries');

$node->append_conf('postgresql.conf', 'job_state.claim_frontiers = 0');
$node->restart;
my $marks = reads_per_claim('per-session marks');
cmp_ok($marks, '>=', 2 * $shared,
	'without it claims read the dead entries again, at least twice as many (the test can tell)');

$node->append_conf('postgresql.conf', 'job_state.claim_frontiers = 64');
$node->restart;

# --- a prepared transaction turns frontiers off ------------------------------
recreate_extension(q{
	SELECT job_state.create_queue('p');
	SELECT job_state.submit('p', pg_catalog.jsonb_build_object('n', i),
		run_after => '2026-01-01'::timestamptz + i * interval '1 s')
	  FROM pg_catalog.generate_series(1, 10) i;});
my $claim_p = q{SELECT pg_catalog.string_agg(job_id::text, ',' ORDER BY job_id)
	FROM job_state.claim('p', 'w', max_jobs => 2)};
is($node->safe_psql('postgres', $claim_p), '1,2', 'claims move the frontier');
$node->safe_psql(
	'postgres', q{
	BEGIN;
	SET LOCAL job_state.notify = off;
	SELECT job_state.submit('p', '{"n": 0}', run_after => '2025-01-01');
	PREPARE TRANSACTION 'old_job';});
is($node->safe_psql('postgres', $claim_p), '3,4', 'the prepared job is not visible yet');
$node->safe_psql('postgres', q{COMMIT PREPARED 'old_job'});
is($node->safe_psql('postgres', $claim_p), '5,11',
	'after COMMIT PREPARED the job made ready below the frontier is claimed first');

# --- more queues than frontiers: the one used longest ago is given up --------
$node->append_conf('postgresql.conf', 'job_state.claim_frontiers = 1');
$node->restart;
$node->safe_psql(
	'postgres', q{
	SELECT job_state.create_queue(q) FROM pg_catalog.unnest('{e1,e2}'::text[]) q;
	SELECT job_state.submit(q, pg_catalog.jsonb_build_object('n', i),
		run_after => '2026-01-01'::timestamptz + i * interval '1 s')
	  FROM pg_catalog.unnest('{e1,e2}'::text[]) q, pg_catalog.generate_series(1, 6) i;});
my $taken = '';
for my $round (1 .. 3)
{
	for my $q ('e1', 'e2')
	{
		$taken .= $node->safe_psql('postgres',
			qq{SELECT '$q:' || pg_catalog.string_agg((j.input ->> 'n'), ',' ORDER BY j.id)
			     FROM job_state.claim('$q', 'w', max_jobs => 2) c
			     JOIN job_state.job j ON j.queue = '$q' AND j.id = c.job_id}) . ' ';
	}
}
is($taken, 'e1:1,2 e2:1,2 e1:3,4 e2:3,4 e1:5,6 e2:5,6 ',
	'two queues taking turns at one frontier claim every job in order');

# --- no job left behind --------------------------------------------------------
is( $node->safe_psql(
		'postgres', q{
	SELECT pg_catalog.count(*) FROM job_state.claim('p', 'w', max_jobs => 100)}),
	'5', 'the rest of the queue is claimed');

is($node->safe_psql('postgres',
	q{SELECT pg_catalog.count(*) FROM job_state.job WHERE status = 'accepted'}),
	'0', 'no job is left waiting');

# the severity, not the word: the log holds statements with claim tokens,
# whose base64 may spell either
ok(!$node->log_contains(qr/(?:PANIC|TRAP):/), 'no PANIC or failed assertion');
$node->stop;
done_testing();
