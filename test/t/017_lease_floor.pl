
# Claim's check for run-out leases under a pinned xmin horizon, and what
# the session's lease floor (lease_floor.c) must not hide.
#
# A session left idle in a transaction pins the horizon: vacuum removes no
# entry of job_lease.  Four workers submit, claim and succeed 2,000 jobs of
# a queue whose lease is 1 s; 2 s later every entry their running versions
# left in job_lease lies below the clock, where every claim checks for a
# lease that ran out.  One session then claims and succeeds 100 more jobs:
# with its lease floor it reads those entries about once, not 2,000 times
# per claim as a walk from the start of the queue's entries does
# (pg_stat_user_indexes.idx_tup_read of job_lease counts the entries read).
#
# Then, with that session's floor standing: a job whose 1-s lease runs out
# behind 500 more dead entries is found by its next claim (unknown,
# lease_expired); a lease put in the past by a restore in the same session
# is found by its next claim (the job trigger lowers the floor); and one put
# in the past from another session is found by sweep(), which never uses a
# floor.  Entries that lead to a pruned HOT chain (a redirect) are passed
# like the others.  No preload at first: no sweeper, no frontier, the
# floors are session memory.  Then preloaded, the sweeper's rounds under a
# pin, and its single pass once there are more than 1,000 queues.

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('lease_floor');
$node->init;
$node->append_conf('postgresql.conf', "autovacuum_naptime = 1\n");
$node->start;
$node->safe_psql(
	'postgres', q{
	CREATE EXTENSION job_state;
	SELECT job_state.create_queue('l', lease => '1 s');});

my $script = $node->basedir . '/cycle.sql';
open my $fh, '>', $script or die "could not write $script: $!";
print $fh <<'EOS';
SELECT job_state.submit('l', '{"n": 1}') \gset
SELECT count(*) AS got, coalesce(max(token::text), '') AS token FROM job_state.claim('l', 'w' || :client_id) \gset
\if :got
SELECT job_state.succeed(':token');
\endif
EOS
close $fh;

sub cycles
{
	my ($clients, $per_client, $label) = @_;
	my ($out, $err) = ('', '');
	my $ok = IPC::Run::run(
		[
			'pgbench', '-n', '-c', $clients, '-j', '2', '-t', $per_client,
			'-f', $script, '-h', $node->host, '-p', $node->port, 'postgres'
		],
		'>', \$out, '2>', \$err);
	ok($ok, "$label: pgbench ran to its end") or diag($err);
	unlike($err, qr/ERROR/, "$label: no claim or succeed raised an error");
}

sub lease_reads
{
	return $node->safe_psql('postgres',
		q{SELECT idx_tup_read FROM pg_catalog.pg_stat_user_indexes
		   WHERE indexrelid = 'job_state.job_lease'::pg_catalog.regclass});
}

# entries of job_lease read since $before, once the sessions that read
# them were idle a while (their statistics reach the shared ones then)
sub lease_reads_since
{
	my ($before) = @_;
	$node->poll_query_until(
		'postgres', qq{
		SELECT idx_tup_read > $before FROM pg_catalog.pg_stat_user_indexes
		 WHERE indexrelid = 'job_state.job_lease'::pg_catalog.regclass});
	sleep 1.5;
	return lease_reads() - $before;
}

my $pin = $node->background_psql('postgres');
$pin->query_safe('BEGIN');
$pin->query_safe('SELECT pg_catalog.txid_current()');

cycles(4, 500, 'pinned');
sleep 2;    # every lease of those 2,000 jobs is now in the past

# --- one session's claims read the dead entries about once ---------------------
my $m = $node->background_psql('postgres');
my $before = lease_reads();
for my $i (1 .. 100)
{
	$m->query_safe(q{SELECT job_state.submit('l', '{"n": 2}')});
	$m->query_safe(
		q{SELECT job_state.succeed(token) FROM job_state.claim('l', 'm')});
}
my $reads = lease_reads_since($before);
my $dead = $node->safe_psql('postgres',
	q{SELECT n_dead_tup FROM pg_catalog.pg_stat_user_tables
	   WHERE relid = 'job_state.job'::pg_catalog.regclass});
diag("100 claims of one session read $reads entries of job_lease; $dead dead tuples");
cmp_ok($dead, '>=', 2000, 'the pin kept the dead versions');
cmp_ok($reads, '>=', 1900, 'the first check read the dead entries (the test can tell)');
cmp_ok($reads, '<=', 5000,
	'the other 99 checks did not read them again (a walk from the start reads 2,000 each)');

# --- a lease that runs out behind the floor is found ---------------------------
my $other = $node->background_psql('postgres');
$other->query_safe(q{SELECT job_state.submit('l', '{"stuck": true}')});
my $stuck = $other->query_safe(q{SELECT job_id FROM job_state.claim('l', 'stuck-worker')});
cycles(4, 125, 'behind the stuck job');
sleep 2;
$m->query_safe(q{SELECT pg_catalog.count(*) FROM job_state.claim('l', 'm')});
is( $node->safe_psql(
		'postgres', qq{SELECT status || '/' || reason FROM job_state.job WHERE id = $stuck}),
	'unknown/lease_expired',
	'a lease that ran out behind the dead entries is found by the next claim');

# --- a lease written into the past in this session lowers its floor -------------
$other->query_safe(q{SELECT job_state.create_queue('r', lease => '1 s')});
$other->query_safe(q{SELECT job_state.submit('r', '{"restored": true}')});
my $restored = $other->query_safe(
	q{SELECT job_id FROM job_state.claim('r', 'w', lease => '1 hour')});
# a floor for queue r in session m: 20 jobs run there, their leases pass
for my $i (1 .. 20)
{
	$m->query_safe(q{SELECT job_state.submit('r', '{}')});
	$m->query_safe(q{SELECT job_state.succeed(token) FROM job_state.claim('r', 'm')});
}
sleep 2;
$m->query_safe(q{SELECT pg_catalog.count(*) FROM job_state.claim('r', 'm')});
$m->query_safe(
	qq{SET job_state.restore = on;
	   UPDATE job_state.job SET lease_expires_at = pg_catalog.now() - interval '1 hour'
	    WHERE queue = 'r' AND id = $restored;
	   RESET job_state.restore;});
$m->query_safe(q{SELECT pg_catalog.count(*) FROM job_state.claim('r', 'm')});
is( $node->safe_psql(
		'postgres', qq{SELECT status || '/' || reason FROM job_state.job WHERE id = $restored}),
	'unknown/lease_expired',
	'a lease put in the past by this session, below its floor, is found by its next claim');

# --- one put in the past by another session: sweep() finds it ---------------------
$other->query_safe(q{SELECT job_state.submit('r', '{"late": true}')});
my $late = $other->query_safe(
	q{SELECT job_id FROM job_state.claim('r', 'w', lease => '1 hour')});
$other->query_safe(
	qq{SET job_state.restore = on;
	   UPDATE job_state.job SET lease_expires_at = pg_catalog.now() - interval '1 hour'
	    WHERE queue = 'r' AND id = $late;
	   RESET job_state.restore;});
$m->query_safe(q{SELECT pg_catalog.count(*) FROM job_state.sweep()});
is( $node->safe_psql(
		'postgres', qq{SELECT status || '/' || reason FROM job_state.job WHERE id = $late}),
	'unknown/lease_expired', 'sweep() uses no floor: it finds a lease another session put in the past');

$pin->query_safe('COMMIT');
$pin->quit;
$m->quit;
$other->quit;

# --- entries that lead through a redirect are passed as well ----------------------
# cancel() of a running job sets cancel_requested alone, which no index
# names: a HOT update.  Once VACUUM has pruned the claim's version, each
# job_lease entry the claim wrote leads to a redirect and then to the
# cancel's version, which the succeed (under a new pin) makes dead.  A check
# that stopped at the redirect would read all 300 entries at every claim.
$node->safe_psql(
	'postgres', q{
	CREATE EXTENSION pageinspect;
	SELECT job_state.create_queue('h', lease => '4 s');
	SELECT count(*) FROM pg_catalog.generate_series(1, 300) g,
		LATERAL job_state.submit('h', pg_catalog.jsonb_build_object('n', g));
	CREATE TABLE h_claims AS
		SELECT token, job_id FROM job_state.claim('h', 'w', lease => '15 s', max_jobs => 300);
	VACUUM job_state.job;});
# 20 cancels at a time, each batch followed by VACUUM, which prunes the
# versions the batch left dead (to redirects) and leaves room on the page
# for the next batch's HOT updates
for my $batch (0 .. 14)
{
	my $from = $batch * 20;
	$node->safe_psql(
		'postgres', qq{
		SELECT count(*) FROM (SELECT job_id FROM h_claims ORDER BY job_id
			OFFSET $from LIMIT 20) c WHERE job_state.cancel(c.job_id)});
	$node->safe_psql('postgres', 'VACUUM job_state.job');
}
my $redirects = $node->safe_psql(
	'postgres', q{
	SELECT count(*) FROM pg_catalog.generate_series(0,
			(pg_catalog.pg_relation_size('job_state.job') / 8192)::int - 1) b,
		LATERAL public.heap_page_items(public.get_raw_page('job_state.job', b)) i
	 WHERE i.lp_flags = 2});
diag("$redirects of the 300 claims' versions were pruned to a redirect");
# stopping at a redirect would stop the floor at the first such entry:
# with 100 of them the later checks would read at least 100 entries each
cmp_ok($redirects, '>=', 100,
	"the claims' versions were pruned to redirects (the test can tell)");
my $h_lease_end = $node->safe_psql('postgres',
	q{SELECT max(lease_expires_at) FROM job_state.job WHERE queue = 'h'});
$pin = $node->background_psql('postgres');
$pin->query_safe('BEGIN');
$pin->query_safe('SELECT pg_catalog.txid_current()');
$node->safe_psql('postgres',
	q{SELECT count(*) FROM h_claims WHERE job_state.succeed(token) IS NOT NULL});
# the 15-s leases of the 300 claims pass (their running versions are gone)
$node->safe_psql('postgres',
	qq{SELECT pg_catalog.pg_sleep_until('$h_lease_end'::timestamptz + interval '0.5 s')});
$m = $node->background_psql('postgres');
$before = lease_reads();
for my $i (1 .. 50)
{
	$m->query_safe(q{SELECT job_state.submit('h', '{"n": 0}')});
	$m->query_safe(
		q{SELECT job_state.succeed(token) FROM job_state.claim('h', 'm')});
}
$reads = lease_reads_since($before);
diag("50 claims past 300 entries that lead through redirects read $reads entries of job_lease");
cmp_ok($reads, '>=', 290, 'the first check read the entries behind the redirects');
cmp_ok($reads, '<=', 3000,
	'the other 49 checks did not read them again (stopping at a redirect reads 300 each)');
$pin->query_safe('COMMIT');
$pin->quit;
$m->quit;

# --- the sweeper walks from its own floors ------------------------------------------
# Preloaded, the sweeper runs every 100 ms.  Under a new pin 2,000 jobs with
# a 1-s lease run, and a stuck one behind them; its lease runs out, and the
# sweeper finds it.  Over the next 5 s (about 50 rounds) it reads the dead
# entries about once, not 2,000 times a round as a pass over every queue.
$node->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'job_state'
job_state.database = 'postgres'
job_state.sweep_interval = 100
});
$node->restart;
$pin = $node->background_psql('postgres');
$pin->query_safe('BEGIN');
$pin->query_safe('SELECT pg_catalog.txid_current()');
cycles(4, 500, 'pinned, preloaded');
$other = $node->background_psql('postgres');
$other->query_safe(q{SELECT job_state.submit('l', '{"stuck": 2}')});
my $stuck2 = $other->query_safe(q{SELECT job_id FROM job_state.claim('l', 'stuck-worker')});
ok( $node->poll_query_until(
		'postgres',
		qq{SELECT status = 'unknown' FROM job_state.job WHERE id = $stuck2}),
	'the sweeper finds a lease that ran out behind the dead entries');
$before = lease_reads();
sleep 5;
$node->poll_query_until(
	'postgres', qq{
	SELECT idx_tup_read > $before FROM pg_catalog.pg_stat_user_indexes
	 WHERE indexrelid = 'job_state.job_lease'::pg_catalog.regclass});
$reads = lease_reads() - $before;
diag("the sweeper's rounds over 5 s read $reads entries of job_lease");
cmp_ok($reads, '<=', 10000,
	"the sweeper's rounds did not read the dead entries again (a full pass reads 2,000 each)");
$pin->query_safe('COMMIT');
$pin->quit;
$other->quit;

# --- beyond 1,000 queues the sweeper applies expiry in one pass -------------------
# (no floors: one check per queue a round would cost more than the pass)
$node->safe_psql('postgres',
	q{SELECT count(*) FROM pg_catalog.generate_series(1, 1000) g,
		LATERAL job_state.create_queue('many' || g, lease => '1 s')});
is($node->safe_psql('postgres', q{SELECT count(*) > 1000 FROM job_state.queue}),
	't', 'more than 1,000 queues');
$other = $node->background_psql('postgres');
$other->query_safe(q{SELECT job_state.submit('many1000', '{"stuck": 3}')});
my $stuck3 = $other->query_safe(
	q{SELECT job_id FROM job_state.claim('many1000', 'stuck-worker')});
ok( $node->poll_query_until(
		'postgres',
		qq{SELECT status = 'unknown' FROM job_state.job WHERE id = $stuck3}),
	'with more than 1,000 queues the sweeper still finds a lease that ran out');
$other->quit;

# the severity, not the word: the log holds statements with claim tokens,
# whose base64 may spell either
ok(!$node->log_contains(qr/(?:PANIC|TRAP):/), 'no PANIC or failed assertion');
$node->stop;
done_testing();
