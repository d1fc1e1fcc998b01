
# Retention under load (src/retention.c, src/sweeper.c).  With job_state
# preloaded and the sweeper running every 100 ms, one session submits and
# completes jobs in a loop for about 60 s in a queue whose retention is one
# second (job_state.min_retention, superuser only, lowers the one-minute
# floor for this); the jobs end succeeded, failed (some with an operation
# record and spend) or cancelled.  Nobody calls sweep() or purge().
#
# Asserted: the job and job_event row counts stay below a bound set by the
# measured submit rate (a few seconds' worth of jobs plus one batch), far
# below what was submitted; jobs that are not finished (accepted, running,
# running with a cancel request, unknown twice over) and the finished job
# of a queue without retention are never removed, sampled all the time;
# once the load stops every finished job of the queue goes, and no history,
# spend or operation row is left without its job; the sweeper logged no
# error.  Then, with the sweeper paused, a backlog of 20,000 old jobs: the
# plan of the real retention statement (auto_explain, in a session that
# calls sweep()) reads job_event_log, spend and operation by index, and sweep()
# works the backlog off 1000 jobs per call.

use strict;
use warnings;

use Time::HiRes qw(time usleep);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $load_seconds = 60;
my $batch = 1000;				# JS_RETENTION_BATCH

my $node = PostgreSQL::Test::Cluster->new('retention');
$node->init;
$node->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'job_state'
job_state.sweep_interval = 100
});
$node->start;

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION job_state;
SET job_state.min_retention = 1;
SELECT job_state.create_queue('soak', retention => '1 s', max_retries => 0,
	lease => '1 hour');
SELECT job_state.create_queue('keep');
});

# --- jobs that must stay ---------------------------------------------------
my %sentinel;
sub one
{
	return $node->safe_psql('postgres', shift);
}
$sentinel{running} = one(q{SELECT job_id FROM job_state.submit('soak', '{"s": "running"}')});
one(q{SELECT job_id FROM job_state.claim('soak', 's')});
$sentinel{unknown} = one(q{SELECT job_id FROM job_state.submit('soak', '{"s": "unknown"}')});
one(q{SELECT job_state.fail(token, 'unknown') FROM job_state.claim('soak', 's')});
$sentinel{expired} = one(q{SELECT job_id FROM job_state.submit('soak', '{"s": "expired"}')});
one(q{SELECT job_id FROM job_state.claim('soak', 's', lease => '1 s')});
$sentinel{cancelling} = one(q{SELECT job_id FROM job_state.submit('soak', '{"s": "cancelling"}')});
one(q{SELECT job_id FROM job_state.claim('soak', 's')});
one(qq{SELECT job_state.cancel($sentinel{cancelling})});
$sentinel{accepted} = one(
	q{SELECT job_id FROM job_state.submit('soak', '{"s": "accepted"}', run_after => now() + '1 day')});
$sentinel{kept} = one(q{SELECT job_id FROM job_state.submit('keep', '{"s": "kept"}')});
one(q{SELECT job_state.succeed(token) FROM job_state.claim('keep', 's')});

my $ids = join(',', sort { $a <=> $b } values %sentinel);
my $sentinel_sql =
  qq{SELECT string_agg(id || ':' || status, ',' ORDER BY id) FROM job_state.job WHERE id IN ($ids)};
ok( $node->poll_query_until(
		'postgres',
		qq{SELECT status = 'unknown' FROM job_state.job WHERE id = $sentinel{expired}}),
	'the sweeper expired the lease of a sentinel');
my $sentinels_before = one($sentinel_sql);
is( $sentinels_before,
	join(',',
		map { "$sentinel{$_}:" . ($_ eq 'expired' ? 'unknown' : $_ eq 'cancelling' ? 'running' : $_ eq 'kept' ? 'succeeded' : $_) }
		  sort { $sentinel{$a} <=> $sentinel{$b} } keys %sentinel),
	'sentinels: running, unknown (twice), running with a cancel request, accepted, and a finished job of a queue without retention');

# --- the load ----------------------------------------------------------------
my $load = $node->background_psql('postgres');
my $probe = $node->background_psql('postgres');
my ($submitted, $iterations, $max_jobs, $max_events, $sentinel_breaks) = (0, 0, 0, 0, 0);
my $start = time;
while (time - $start < $load_seconds)
{
	$iterations++;
	$submitted += $load->query_safe(
		qq{SELECT count(*) FROM (SELECT job_state.submit('soak',
			jsonb_build_object('i', i, 'it', $iterations),
			budget => '{"usd": 10}') FROM generate_series(1, 40) i) s});
	# 30 succeed, 5 record an operation and spend and fail, 5 are cancelled
	$load->query_safe(
		q{SELECT count(*) FROM job_state.succeed_many(ARRAY(
			SELECT token FROM job_state.claim('soak', 'w', max_jobs => 30)))});
	$load->query_safe(
		q{SELECT count(*) FROM job_state.claim('soak', 'w', max_jobs => 5) c,
			LATERAL job_state.begin_operation(c.token, 'mail') o,
			LATERAL job_state.charge(c.token, 'usd', 1) s,
			LATERAL job_state.fail(c.token, 'permanent') f});
	$load->query_safe(
		q{SELECT count(*) FILTER (WHERE job_state.cancel(id)) FROM job_state.job
		   WHERE queue = 'soak' AND status = 'accepted' AND run_after < now() + '1 hour'});

	my ($jobs, $events, $sentinels) = split /\|/, $probe->query_safe(
		qq{SELECT (SELECT count(*) FROM job_state.job),
				  (SELECT count(*) FROM job_state.job_event),
				  ($sentinel_sql)});
	$max_jobs = $jobs if $jobs > $max_jobs;
	$max_events = $events if $events > $max_events;
	$sentinel_breaks++ if $sentinels ne $sentinels_before;
}
my $elapsed = time - $start;
my $rate = $submitted / $elapsed;

# a few seconds' worth of jobs and one batch: retention is 1 s, rounds are
# 100 ms apart, and a round on a busy machine can come late
my $job_bound = int($rate * 5) + $batch + 10;
note(sprintf('%d jobs submitted in %.1f s (%.0f/s, %d iterations); at most %d jobs and %d job_event rows seen; bound %d jobs',
	$submitted, $elapsed, $rate, $iterations, $max_jobs, $max_events, $job_bound));
cmp_ok($submitted, '>', 4 * $job_bound, 'the load submitted far more jobs than the bound');
cmp_ok($max_jobs, '<=', $job_bound, 'job rows stayed below the bound');
cmp_ok($max_events, '<=', 3 * $job_bound, 'job_event rows stayed below the bound (3 per job)');
is($sentinel_breaks, 0, 'no sentinel changed or went while the sweeper deleted');

# --- after the load: every finished job of the queue goes ----------------------
ok( $node->poll_query_until(
		'postgres',
		q{SELECT count(*) = 0 FROM job_state.job WHERE queue = 'soak'
		   AND status IN ('succeeded', 'failed', 'cancelled')}),
	'the sweeper deleted every finished job of the queue once the load stopped');
is(one($sentinel_sql), $sentinels_before, 'the sentinels are still there, unchanged');
is( one(
		q{SELECT (SELECT count(*) FROM job_state.job_event e WHERE NOT EXISTS (
				SELECT FROM job_state.job j WHERE j.queue = e.queue AND j.id = e.job_id))
			|| '|' || (SELECT count(*) FROM job_state.operation)
			|| '|' || (SELECT count(*) FROM job_state.spend)}),
	'0|0|0',
	'no history, operation or spend row outlived its job');
my $log = slurp_file($node->logfile);
unlike($log, qr/ERROR:/, 'no statement failed, the sweeper logged no error');

# --- a backlog, with the sweeper paused: plans and batches ---------------------
$node->append_conf('postgresql.conf', "job_state.sweep_interval = '1h'\n");
$node->reload;
ok( $node->poll_query_until(
		'postgres', q{SELECT count(*) = 0 FROM pg_stat_activity
		   WHERE backend_type = 'job_state sweeper' AND state = 'active'}),
	'the sweeper waits for its next round');
# let a round that started before the reload finish, then the backlog
usleep(500_000);
$load->query_safe(
	q{SELECT count(*) FROM (SELECT job_state.submit('soak', jsonb_build_object('b', i),
		budget => '{"usd": 10}') FROM generate_series(1, 20000) i) s});
for (1 .. 2)
{
	$load->query_safe(
		q{SELECT count(*) FROM job_state.succeed_many(ARRAY(
			SELECT token FROM job_state.claim('soak', 'w', max_jobs => 9000)))});
}
$load->query_safe(
	q{SELECT count(*) FROM job_state.claim('soak', 'w', max_jobs => 2000) c,
		LATERAL job_state.begin_operation(c.token, 'mail') o,
		LATERAL job_state.charge(c.token, 'usd', 1) s,
		LATERAL job_state.fail(c.token, 'permanent') f});
$load->query_safe('ANALYZE job_state.job, job_state.job_event_log, job_state.spend, job_state.operation');
$load->quit;
$probe->quit;
usleep(1_200_000);

my $explain = $node->background_psql('postgres');
$explain->query_safe(q{LOAD 'auto_explain'});
$explain->query_safe(q{SET auto_explain.log_min_duration = 0});
$explain->query_safe(q{SET auto_explain.log_nested_statements = on});
my $log_offset = -s $node->logfile;
is($explain->query_safe('SELECT job_state.sweep()'), $batch, 'sweep() deletes one batch of the backlog');
$explain->quit;
my $plans = substr(slurp_file($node->logfile), $log_offset);
my ($retention_plan) = $plans =~ /(Query Text: WITH d AS \(  DELETE FROM job_state\.job j USING.*?)(?:\n\S|\z)/s;
ok(defined $retention_plan, 'auto_explain logged the plan of the retention statement');
$retention_plan //= '';
note($retention_plan);
for my $table (qw(job job_event_log spend operation job_ref))
{
	unlike($retention_plan, qr/Seq Scan on $table\b/, "the retention statement reads job_state.$table by index");
}
like($retention_plan, qr/Index (?:Only )?Scan using job_finished on job\b/, 'jobs are selected by job_finished');
like($retention_plan, qr/using job_event_job on job_event_log\b/, 'history by job_event_job');

my $left = one(q{SELECT count(*) FROM job_state.job WHERE queue = 'soak' AND status IN ('succeeded', 'failed', 'cancelled')});
is($left, 20000 - $batch, 'the rest of the backlog waits');
my $calls = 0;
while (one('SELECT job_state.sweep()') > 0)
{
	$calls++;
	last if $calls > 100;
}
is($calls, int(($left + $batch - 1) / $batch), 'sweep() works the backlog off one batch per call');
is(one($sentinel_sql), $sentinels_before, 'the sentinels are still there');

$node->stop;
done_testing();
