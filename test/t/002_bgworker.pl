# The background worker (src/sweeper.c): with job_state preloaded, leases
# expire and schedules fire with nobody calling claim() or sweep(); the
# worker waits quietly until the extension is installed, follows a SIGHUP,
# survives a failing round, a DROP/CREATE EXTENSION, a restart and being
# terminated, and never sleeps inside a transaction.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('bgworker');
$node->init;
$node->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'job_state'
job_state.sweep_interval = 200
restart_after_crash = on
});
$node->start;

my $worker_pid_sql = q{
SELECT pid FROM pg_stat_activity
 WHERE backend_type = 'job_state sweeper'
   AND application_name = 'job_state sweeper'
   AND datname = 'postgres'};

sub worker_pid
{
	ok( $node->poll_query_until(
			'postgres', "SELECT count(*) = 1 FROM ($worker_pid_sql) w"),
		'the worker is running');
	return $node->safe_psql('postgres', $worker_pid_sql);
}

# A job claimed with a short lease; nobody calls claim() or sweep() again.
sub claim_with_short_lease
{
	my $queue = shift;
	my $id = $node->safe_psql('postgres',
		"SELECT job_id FROM job_state.submit('$queue', '{}')");
	my $claimed = $node->safe_psql('postgres',
		"SELECT job_id FROM job_state.claim('$queue', 'w1', lease => '1 second')"
	);
	is($claimed, $id, "job $id claimed");
	return $id;
}

sub expires
{
	my ($id, $what) = @_;
	ok( $node->poll_query_until(
			'postgres', qq{
SELECT status = 'unknown' AND reason = 'lease_expired'
  FROM job_state.job WHERE id = $id}),
		"the worker expired the lease of job $id ($what)");
}

# --- waits quietly until the extension is installed ------------------------
my $pid = worker_pid();
my $log_offset = -s $node->logfile;
sleep(1);
ok(!$node->log_contains(qr/ERROR/, $log_offset),
	'no errors while the extension is not installed');

# ... but says once, with a hint, that it is missing -- not every round
my $missing =
  qr/LOG:  job_state sweeper: extension job_state is not installed in database "postgres"/;
my $found =
  qr/LOG:  job_state sweeper: extension job_state is installed in database "postgres"; the worker goes to work/;

sub log_count
{
	my ($re, $offset) = @_;
	my $log = slurp_file($node->logfile, $offset);
	my @all = $log =~ /$re/g;
	return scalar @all;
}
$node->wait_for_log($missing, 0);
sleep(1);    # 5 rounds of 200 ms
is(log_count($missing, 0), 1, 'the missing extension is logged once over several rounds');
like(
	slurp_file($node->logfile),
	qr/$missing.*\n.*DETAIL:  .*\n.*HINT:  Run CREATE EXTENSION job_state in database "postgres", or set job_state.database/,
	'with a hint to create it or set job_state.database');

$log_offset = -s $node->logfile;
$node->safe_psql('postgres', 'CREATE EXTENSION job_state');
$node->safe_psql('postgres', "SELECT job_state.create_queue('bgw')");
$node->wait_for_log($found, $log_offset);

# --- lease expiry without claim or sweep -----------------------------------
expires(claim_with_short_lease('bgw'), 'first start');

# no transaction or snapshot held between rounds
ok( $node->poll_query_until(
		'postgres', qq{
SELECT state = 'idle' AND xact_start IS NULL AND backend_xmin IS NULL
  FROM pg_stat_activity WHERE pid = $pid}),
	'the worker sleeps outside any transaction');

# --- SIGHUP: a new interval is followed --------------------------------------
$log_offset = -s $node->logfile;
$node->safe_psql('postgres',
	"ALTER SYSTEM SET job_state.sweep_interval = '1h'");
$node->reload;
$node->wait_for_log(qr/job_state sweeper now sweeps every 3600000 ms/,
	$log_offset);
my $slow = claim_with_short_lease('bgw');
sleep(3);
is( $node->safe_psql(
		'postgres', "SELECT status FROM job_state.job WHERE id = $slow"),
	'running',
	'with a 1 hour interval the lease is not expired after 3 seconds');
$node->safe_psql('postgres', 'ALTER SYSTEM RESET job_state.sweep_interval');
$node->reload;
expires($slow, 'interval back to 200 ms, woken by SIGHUP');
is($node->safe_psql('postgres', $worker_pid_sql), $pid,
	'same worker after the reloads');

# --- a failing round is logged; the worker goes on ---------------------------
$log_offset = -s $node->logfile;
$node->safe_psql('postgres',
	'ALTER FUNCTION job_state.sweep() RENAME TO sweep_renamed');
$node->wait_for_log(qr/ERROR:  function job_state\.sweep\(\) does not exist/,
	$log_offset);
my $blocked = claim_with_short_lease('bgw');
sleep(2);
is( $node->safe_psql(
		'postgres', "SELECT status FROM job_state.job WHERE id = $blocked"),
	'running',
	'no expiry while the rounds fail');
$node->safe_psql('postgres',
	'ALTER FUNCTION job_state.sweep_renamed() RENAME TO sweep');
expires($blocked, 'after failing rounds');
is($node->safe_psql('postgres', $worker_pid_sql), $pid,
	'the failing rounds did not end the worker');

# --- DROP and CREATE EXTENSION: the kept plan follows ------------------------
# (its jobs are unknown, so the drop guard needs the setting)
$log_offset = -s $node->logfile;
$node->safe_psql('postgres',
	'SET job_state.drop_live_jobs = on; DROP EXTENSION job_state CASCADE');
# the worker says once that the extension has gone, and once that it is back
$node->wait_for_log($missing, $log_offset);
sleep(1);
is(log_count($missing, $log_offset), 1, 'a dropped extension is logged once');
$node->safe_psql('postgres', 'CREATE EXTENSION job_state');
$node->wait_for_log($found, $log_offset);
sleep(1);
is(log_count($found, $log_offset), 1, 'and once when it is back');
$node->safe_psql('postgres', "SELECT job_state.create_queue('bgw')");
expires(claim_with_short_lease('bgw'), 'extension created again');
is($node->safe_psql('postgres', $worker_pid_sql), $pid,
	'same worker after DROP/CREATE EXTENSION');

# --- restart -------------------------------------------------------------------
my $clean_from = -s $node->logfile;
$node->restart;
my $pid2 = worker_pid();
isnt($pid2, $pid, 'a new worker after the restart');
expires(claim_with_short_lease('bgw'), 'after restart');

# --- terminated: the postmaster starts it again ------------------------------
$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid2)");
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 1 FROM ($worker_pid_sql) w WHERE pid <> $pid2"),
	'the worker is started again after pg_terminate_backend');
expires(claim_with_short_lease('bgw'), 'after pg_terminate_backend');

# --- a crash: the postmaster restarts everything, the worker included ------
my $pid3 = $node->safe_psql('postgres', $worker_pid_sql);
kill 'KILL', $pid3;
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 1 FROM ($worker_pid_sql) w WHERE pid <> $pid3"),
	'the worker is back after it was killed with SIGKILL');
expires(claim_with_short_lease('bgw'), 'after a crash');

# --- schedules fire by themselves --------------------------------------------
# Created this minute, '* * * * *' is due at once.  (Ticks go to their own
# queue, so that the claims below take the jobs they submit.)
$node->safe_psql('postgres', "SELECT job_state.create_queue('bgw_sched')");
$node->safe_psql('postgres',
	q{SELECT job_state.schedule('every_minute', '* * * * *', 'bgw_sched', '{"tick": 1}')}
);
ok( $node->poll_query_until(
		'postgres', q{
SELECT count(*) > 0 FROM job_state.job j, job_state.schedule s
 WHERE s.name = 'every_minute' AND j.queue = 'bgw_sched'
   AND j.idempotency_key = 'every_minute@' ||
       to_char(s.last_tick AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI"Z"')}),
	'the worker submitted the tick of a new schedule');
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM job_state.job
 WHERE queue = 'bgw_sched' AND idempotency_key LIKE 'every_minute@%'
   AND idempotency_key !~ '^every_minute@\d{4}-\d\d-\d\dT\d\d:\d\dZ$'}),
	'0',
	'tick keys are name@YYYY-MM-DDTHH:MIZ');

# After downtime (created long ago, last tick years back) only the latest
# missed tick; a last_tick set back (a lost update) does not double it.
$node->safe_psql(
	'postgres', q{
BEGIN;
SELECT job_state.schedule('yearly', '0 0 1 1 *', 'bgw_sched', '{"year": true}');
UPDATE job_state.schedule
   SET created_at = now() - interval '5 years',
       last_tick = job_state.cron_prev(cron, now()) - interval '3 years'
 WHERE name = 'yearly';
COMMIT;
});
my $tick_is_latest = q{
SELECT last_tick = job_state.cron_prev(cron, now())
  FROM job_state.schedule WHERE name = 'yearly'};
ok($node->poll_query_until('postgres', $tick_is_latest),
	'the worker submitted the latest missed tick');
my $yearly_jobs = q{
SELECT count(*) FROM job_state.job
 WHERE queue = 'bgw_sched' AND idempotency_key LIKE 'yearly@%'};
is($node->safe_psql('postgres', $yearly_jobs), '1', 'one job for the ticks missed');
$node->safe_psql('postgres',
	q{UPDATE job_state.schedule SET last_tick = last_tick - interval '1 year' WHERE name = 'yearly'}
);
ok($node->poll_query_until('postgres', $tick_is_latest),
	'the worker did the tick again');
is($node->safe_psql('postgres', $yearly_jobs),
	'1', 'the same tick twice is still one job (idempotency key)');

# --- a due schedule row held by another transaction is skipped -----------------
# A FOR KEY SHARE lock lets the UPDATE below make the row due while the lock
# stays on it (as another sweeper's FOR UPDATE would, mid-tick).  The worker
# must skip the row, not wait: its round would hold back lease expiry.
my $holder = $node->background_psql('postgres');
$holder->query_safe('BEGIN');
$holder->query_safe(
	q{SELECT 1 FROM job_state.schedule WHERE name = 'yearly' FOR KEY SHARE});
$node->safe_psql('postgres',
	q{UPDATE job_state.schedule SET last_tick = last_tick - interval '1 year' WHERE name = 'yearly'}
);
expires(claim_with_short_lease('bgw'), 'while a due schedule row is locked');
is($node->safe_psql('postgres', $tick_is_latest),
	'f', 'the locked schedule was skipped');
$holder->query_safe('COMMIT');
$holder->quit;
ok($node->poll_query_until('postgres', $tick_is_latest),
	'the skipped tick is done once the lock is gone');
is($node->safe_psql('postgres', $yearly_jobs), '1', 'still one job');

ok(!$node->log_contains(qr/ERROR|WARNING/, $clean_from),
	'no errors or warnings since the restart');
ok($node->log_contains(qr/job_state sweeper started in database "postgres"/),
	'the worker logs its start');

$node->stop;
done_testing();
