# job_state.wait() with job_state preloaded (src/wait.c, src/waiter.c): a
# waiter holds no snapshot and no lock while it sleeps (backend_xmin is
# NULL, its only lock is its virtualxid), a completing commit wakes it at
# once (long before its poll interval), a rolled-back completion does not,
# pg_cancel_backend ends a wait at once, and NOTIFY job_state_done_<key> carries
# the id of every job that ended, at commit only.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $node = PostgreSQL::Test::Cluster->new('wait');
$node->init;
$node->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'job_state'
});
$node->start;

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION job_state;
SELECT job_state.create_queue('wq');
CREATE TABLE toks (job_id bigint, token job_state.claim_token);
});

# a new running job; returns its id (its token is in toks)
sub running_job
{
	$node->safe_psql(
		'postgres', q{
SELECT job_state.submit('wq', '{}');
INSERT INTO toks SELECT job_id, token FROM job_state.claim('wq', 'w');
});
	return $node->safe_psql('postgres', 'SELECT max(job_id) FROM toks');
}

# starts CALL job_state.wait($id, $timeout) in a session of its own whose
# poll interval is 10 s: a wake-up sooner than that came from a commit
sub start_waiter
{
	my ($id, $timeout) = @_;
	my $h = $node->background_psql('postgres', on_error_stop => 0);
	$h->query_safe("SET job_state.wait_poll_interval = '10 s'");
	$h->query_safe("SET application_name = 'waiter_$id'");
	$h->query_until(qr/started/,
		"\\echo started\nCALL job_state.wait($id, '$timeout', NULL, NULL, NULL, NULL, NULL);\n");
	ok( $node->poll_query_until(
			'postgres', qq{
SELECT count(*) = 1 FROM pg_stat_activity
 WHERE application_name = 'waiter_$id' AND state = 'active'
   AND wait_event_type = 'Extension'}),
		"waiter for job $id is asleep");
	return $h;
}

sub waiter_pid
{
	my ($id) = @_;
	return $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE application_name = 'waiter_$id'");
}

# --- a sleeping waiter holds no snapshot and no lock ------------------------
my $job = running_job();
my $waiter = start_waiter($job, '60 s');
my $pid = waiter_pid($job);
for my $look (1 .. 5)
{
	is( $node->safe_psql(
			'postgres', qq{
SELECT coalesce(backend_xmin::text, 'none') || ' ' || coalesce(backend_xid::text, 'none')
  FROM pg_stat_activity WHERE pid = $pid}),
		'none none',
		"look $look: the sleeping waiter has no backend_xmin and no xid");
	is( $node->safe_psql(
			'postgres', qq{
SELECT string_agg(locktype || ' ' || mode, ', ' ORDER BY locktype)
  FROM pg_locks WHERE pid = $pid}),
		'virtualxid ExclusiveLock',
		"look $look: the sleeping waiter's only lock is its virtualxid");
	usleep(100_000);
}

# --- a rolled-back completion does not wake it; a committed one does --------
my $listener = $node->background_psql('postgres');
my $done_channel = $node->safe_psql('postgres',
	q{SELECT job_state.queue_channel('wq', 'done')});
$listener->query_safe("LISTEN job_state_done; LISTEN $done_channel");

$node->safe_psql(
	'postgres', qq{
BEGIN;
SELECT job_state.succeed(token, '{"answer": 41}') FROM toks WHERE job_id = $job;
ROLLBACK;
});
usleep(300_000);
is( $node->safe_psql(
		'postgres',
		"SELECT state FROM pg_stat_activity WHERE pid = $pid"),
	'active',
	'a rolled-back succeed leaves the waiter waiting');

my $t0 = time();
$node->safe_psql('postgres',
	"SELECT job_state.succeed(token, '{\"answer\": 42}') FROM toks WHERE job_id = $job");
my $committed = time();
my $out = $waiter->query('SELECT 1');
my $woke = time() - $committed;
like($out, qr/^succeeded\|\{"answer": 42\}\|\|\|/m,
	'the waiter returns the result of the succeed');
cmp_ok($woke, '<', 5,
	"the waiter returned ${woke} s after the commit, long before its 10 s poll");
$waiter->quit;

# --- NOTIFY on the queue's done channel: the ids of ended jobs, at commit ----
my $j2 = running_job();
my $j3 = running_job();
my $j4 = $node->safe_psql('postgres',
	"SELECT job_id FROM job_state.submit('wq', '{\"accepted\": true}')");
$node->safe_psql(
	'postgres', qq{
SELECT job_state.fail(token, 'permanent') FROM toks WHERE job_id = $j2;
BEGIN;
SELECT job_state.succeed(token) FROM toks WHERE job_id = $j3;
ROLLBACK;
SELECT job_state.fail(token, 'unknown') FROM toks WHERE job_id = $j3;
BEGIN;
SELECT job_state.cancel($j4);
ROLLBACK;
SELECT job_state.cancel($j4);
});
my @payloads;
my $heard = '';
for (1 .. 50)
{
	my ($o, $e) = $listener->query('SELECT 1');
	my $all = $o . $listener->{stderr};
	$heard .= $all;
	while ($all =~ /Asynchronous notification "$done_channel" with payload "(\d+)"/g)
	{
		push @payloads, $1;
	}
	$listener->{stderr} = '';
	last if @payloads >= 4;
	usleep(100_000);
}
is_deeply([ sort { $a <=> $b } @payloads ],
	[ $job, $j2, $j3, $j4 ],
	'the done channel: the succeeded, failed, unknown and cancelled jobs, once each; nothing for the rolled-back succeed and cancel');
unlike($heard, qr/notification "job_state_done" /,
	'no job id on job_state_done, which every role may LISTEN to');

# job_state.notify = off: no payload
$node->safe_psql(
	'postgres', qq{
SET job_state.notify = off;
SELECT job_state.reconcile($j3, 'failed');
});
usleep(300_000);
my ($o, $e) = $listener->query('SELECT 1');
unlike($o . $listener->{stderr}, qr/job_state_done/,
	'no notification on the done channel with job_state.notify = off');
$listener->quit;

# --- pg_cancel_backend ends a wait at once ------------------------------------
my $j5 = running_job();
my $canceled = start_waiter($j5, '60 s');
my $cpid = waiter_pid($j5);
$t0 = time();
$node->safe_psql('postgres', "SELECT pg_cancel_backend($cpid)");
$canceled->query('SELECT 1');
my $took = time() - $t0;
like($canceled->{stderr}, qr/canceling statement due to user request/,
	'pg_cancel_backend ends the wait with a query cancel');
cmp_ok($took, '<', 5, "the cancelled wait ended ${took} s after the cancel");
$canceled->quit;

# --- a timeout returns the current state; the poll interval is a safety net --
my $j6 = running_job();
$t0 = time();
$out = $node->safe_psql('postgres',
	"CALL job_state.wait($j6, '1 s', NULL, NULL, NULL, NULL, NULL)");
my $waited = time() - $t0;
like($out, qr/^running\|/, 'after its timeout the waiter returns the running state');
cmp_ok($waited, '>=', 0.9, "the wait took its timeout (${waited} s)");

$node->stop;
done_testing();
