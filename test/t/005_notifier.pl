# The notifier worker (src/notify.c): with job_state preloaded, submit hands
# the wake-up of a new job to the notifier, which sends NOTIFY job_state,
# '<queue>' after the submitting transaction committed.  Rolled-back work
# wakes nobody, a burst becomes one notification per queue, a full set wakes
# every queue, a restarted notifier wakes every queue once, and where the
# notifier does not serve (another database, job_state.notify = commit, the
# notifier is down) submit notifies in its own transaction as before.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('notifier');
$node->init;
$node->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'job_state'
max_prepared_transactions = 2
});
$node->start;

my $notifier_pid_sql = q{
SELECT pid FROM pg_stat_activity
 WHERE backend_type = 'job_state notifier' AND datname = 'postgres'};

sub notifier_pid
{
	ok( $node->poll_query_until(
			'postgres', "SELECT count(*) = 1 FROM ($notifier_pid_sql) n"),
		'the notifier is running');
	return $node->safe_psql('postgres', $notifier_pid_sql);
}

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION job_state;
SELECT job_state.create_queue(q) FROM unnest(ARRAY['mail', 'export', 'idle', 'burst']) q;
});
my $pid = notifier_pid();

my $listener = $node->background_psql('postgres');
# the channels every role could guess: nothing may ever arrive on them
$listener->query_safe('LISTEN job_state; LISTEN job_state_done');

# Each queue's secret work channel (queue_channel), and its queue.
my %queue_of;

sub listen_queues
{
	my $rows = $node->safe_psql('postgres',
		q{SELECT name, job_state.queue_channel(name) FROM job_state.queue});
	for my $row (split /\n/, $rows)
	{
		my ($queue, $channel) = split /\|/, $row;
		next if exists $queue_of{$channel};
		$queue_of{$channel} = $queue;
		$listener->query_safe("LISTEN $channel");
	}
}
listen_queues();

# Notifications the listener has received so far: [queue, sender pid] pairs
# (psql names no payload when it is empty, as a wake-up's is).
my @seen;
my $guessable = 0;

sub drain
{
	my $out = $listener->query_safe('SELECT 1');
	while ($out =~
		/Asynchronous notification "(job_state_[0-9a-f]{32})" received from server process with PID (\d+)/g
	  )
	{
		push @seen, [ $queue_of{$1} // "unknown channel $1", $2 ];
	}
	$guessable++ while ($out =~ /Asynchronous notification "job_state(_done)?" /g);
}

# Waits until a notification for $queue arrives; returns its sender's pid.
sub wait_for
{
	my $queue = shift;
	my $deadline = time() + $PostgreSQL::Test::Utils::timeout_default;
	while (time() < $deadline)
	{
		drain();
		for my $i (0 .. $#seen)
		{
			if ($seen[$i][0] eq $queue)
			{
				my $sender = $seen[$i][1];
				splice(@seen, $i, 1);
				return $sender;
			}
		}
		select(undef, undef, undef, 0.05);
	}
	return undef;
}

sub seen_count
{
	my $queue = shift;
	return scalar grep { $_->[0] eq $queue } @seen;
}

# --- a committed submit: the notifier sends the wake-up ---------------------
$node->safe_psql('postgres',
	q{SELECT job_state.submit('mail', '{"to": "ada"}')});
is(wait_for('mail'), $pid, 'a new job wakes its queue, sent by the notifier');

# --- rolled back: nobody is woken -------------------------------------------
$node->safe_psql(
	'postgres', q{
BEGIN;
SELECT job_state.submit('export', '{"n": 1}');
ROLLBACK;
BEGIN;
SAVEPOINT s;
SELECT job_state.submit('export', '{"n": 2}');
ROLLBACK TO s;
SAVEPOINT t;
SELECT job_state.submit('idle', '{"n": 3}');
RELEASE t;
COMMIT;
});
is(wait_for('idle'), $pid,
	'a job submitted in a released savepoint wakes its queue');
drain();
is(seen_count('export'), 0,
	'a rolled-back transaction or savepoint wakes nobody');

# --- the same key again creates nothing and wakes nobody --------------------
$node->safe_psql('postgres',
	q{SELECT job_state.submit('mail', '{"to": "bob"}', 'k1')});
is(wait_for('mail'), $pid, 'a keyed submit wakes its queue');
$node->safe_psql(
	'postgres', q{
SELECT job_state.submit('mail', '{"to": "bob"}', 'k1');
SELECT job_state.submit('idle', '{}');
});
is(wait_for('idle'), $pid, 'marker received');
drain();
is(seen_count('mail'), 0, 'a submit that returns an existing job wakes nobody');

# --- a burst: one notification per interval (1 s here) ----------------------
$node->append_conf('postgresql.conf', 'job_state.notify_interval = 1000');
$node->reload;
$node->safe_psql('postgres', q{SELECT job_state.submit('idle', '{}')});
wait_for('idle');
my $burst = join('', map { "SELECT job_state.submit('burst', '{}');\n" } 1 .. 30);
$node->safe_psql('postgres', $burst);   # 30 transactions (autocommit)
is(wait_for('burst'), $pid, 'a burst wakes its queue');
sleep(1.5);
drain();
cmp_ok(seen_count('burst'), '<=', 1,
	'30 commits in a burst become at most 2 notifications');
@seen = ();
$node->append_conf('postgresql.conf', 'job_state.notify_interval = 10');
$node->reload;

# --- more queues than the shared set holds: every queue is woken ------------
$node->safe_psql(
	'postgres', q{
SELECT job_state.create_queue('many_' || i) FROM generate_series(1, 70) i;
});
listen_queues();
$node->safe_psql(
	'postgres', q{
BEGIN;
SELECT job_state.submit('many_' || i, '{}') FROM generate_series(1, 70) i;
COMMIT;
});
my $all = 1;
for my $i (1 .. 70)
{
	$all = 0 unless defined wait_for("many_$i");
}
ok($all, 'every one of 70 queues is woken when the set overflows');
is(wait_for('export'), $pid,
	'an overflow wakes every queue, also those without new jobs');
@seen = ();

# --- job_state.notify = commit: the submitting transaction notifies ---------
my $session = $node->background_psql('postgres');
my $session_pid = $session->query_safe('SELECT pg_backend_pid()');
$session->query_safe(
	q{SET job_state.notify = commit; SELECT job_state.submit('export', '{}')});
is(wait_for('export'), $session_pid,
	'with notify = commit the submitting backend sends it');
$session->query_safe(
	q{SET job_state.notify = off; SELECT job_state.submit('export', '{}'); RESET job_state.notify; SELECT job_state.submit('idle', '{}')}
);
wait_for('idle');
drain();
is(seen_count('export'), 0, 'with notify = off nobody is woken');

# --- PREPARE TRANSACTION cannot carry a deferred wake-up --------------------
my ($ok, $stdout, $stderr) = (undef, '', '');
$node->psql(
	'postgres', q{
BEGIN;
SELECT job_state.submit('export', '{"prepared": true}');
PREPARE TRANSACTION 'p1';
},
	stdout => \$stdout,
	stderr => \$stderr);
like(
	$stderr,
	qr/cannot PREPARE a transaction that submitted jobs with job_state.notify on/,
	'PREPARE of a transaction that submitted is refused');
is( $node->safe_psql(
		'postgres',
		q{SELECT count(*) FROM job_state.job WHERE input ? 'prepared'}),
	'0',
	'the refused transaction left no job');
$node->safe_psql(
	'postgres', q{
BEGIN;
SET LOCAL job_state.notify = off;
SELECT job_state.submit('export', '{"prepared": true}');
PREPARE TRANSACTION 'p2';
COMMIT PREPARED 'p2';
});
is( $node->safe_psql(
		'postgres',
		q{SELECT count(*) FROM job_state.job WHERE input ? 'prepared'}),
	'1',
	'with notify off in the transaction it prepares and commits');

# --- another database: not served, the submitter notifies -------------------
$node->safe_psql('postgres', 'CREATE DATABASE other');
$node->safe_psql('other',
	q{CREATE EXTENSION job_state; SELECT job_state.create_queue('mail')});
my $other = $node->background_psql('other');
my $other_channel = $node->safe_psql('other', q{SELECT job_state.queue_channel('mail')});
$other->query_safe("LISTEN $other_channel");
$node->safe_psql('other', q{SELECT job_state.submit('mail', '{}')});
my $other_out = '';
my $deadline = time() + $PostgreSQL::Test::Utils::timeout_default;
until ($other_out =~ /"$other_channel" received/ || time() > $deadline)
{
	$other_out .= $other->query_safe('SELECT 1');
	select(undef, undef, undef, 0.05);
}
unlike($other_out, qr/PID $pid\./, 'in another database ...');
like($other_out, qr/"$other_channel" received/,
	'... the submitting transaction sends the wake-up');
$other->quit;

# --- the notifier is terminated: submitters notify, the new one wakes all ---
$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
ok( $node->poll_query_until(
		'postgres', "SELECT count(*) = 0 FROM ($notifier_pid_sql) n"),
	'the notifier is gone');
my $submitter = $node->background_psql('postgres');
my $submitter_pid = $submitter->query_safe('SELECT pg_backend_pid()');
$submitter->query_safe(q{SELECT job_state.submit('mail', '{}')});
is(wait_for('mail'), $submitter_pid,
	'without a notifier the submitting transaction sends the wake-up');
$submitter->quit;
@seen = ();
my $new_pid = notifier_pid();
isnt($new_pid, $pid, 'the postmaster started a new notifier');
is(wait_for('burst'), $new_pid, 'the new notifier wakes every queue once');
is(wait_for('many_70'), $new_pid, '... all of them');

drain();
is($guessable, 0,
	'nothing was sent on job_state or job_state_done, which every role may LISTEN to');
$listener->quit;
$session->quit;

ok(!$node->log_contains(qr/(ERROR|WARNING):  (?!cannot PREPARE a transaction that submitted jobs)/),
	'no other errors or warnings in the log');

$node->stop;
done_testing();
