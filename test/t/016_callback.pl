# A job waiting for a callback across an immediate stop and a failover:
# the waiting state, its callback timeout and its window are rows like any
# other, so they survive a crash and a promotion; the callback token is
# the claim token, fenced by generation on the new primary too; a timeout
# that passes while the server is down is applied once it is back.
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
	SELECT job_state.create_queue('q', concurrency_limit => 2);
	SELECT job_state.submit('q', jsonb_build_object('n', i)) FROM generate_series(1, 3) i;
});

# job 1 waits for an hour, keeping its slot; job 2 waits 2 s and gives its slot up
my $t1 = $primary->safe_psql('postgres', q{SELECT token FROM job_state.claim('q', 'w1')});
my $t2 = $primary->safe_psql('postgres', q{SELECT token FROM job_state.claim('q', 'w2')});
$primary->safe_psql('postgres', qq{
	SELECT job_state.wait_for_callback('$t1', '1 hour', heartbeat => '30 min');
	SELECT job_state.wait_for_callback('$t2', '2 s', release_slots => true);
});
my $before = $primary->safe_psql('postgres', q{
	SELECT string_agg(id || ':' || status || ':' || generation || ':' || callback_timeout_at
	                  || ':' || lease_expires_at || ':' || coalesce(queue_slot::text, '-'), ',' ORDER BY id)
	  FROM job_state.job WHERE status = 'waiting'});

# a crash: everything of the wait is back after recovery
$primary->stop('immediate');
$primary->start;
is($primary->safe_psql('postgres', q{
	SELECT string_agg(id || ':' || status || ':' || generation || ':' || callback_timeout_at
	                  || ':' || lease_expires_at || ':' || coalesce(queue_slot::text, '-'), ',' ORDER BY id)
	  FROM job_state.job WHERE status = 'waiting'}),
	$before, 'waiting jobs, their timeouts, windows and slots survive an immediate stop');
# job 2's timeout passed while the server was down: applied now
sleep 2;
is($primary->safe_psql('postgres', q{SELECT job_state.sweep()}), '1',
	'a callback timeout that passed during the outage is applied after recovery');
is($primary->safe_psql('postgres', q{SELECT status || ':' || reason FROM job_state.job WHERE id = 2}),
	'unknown:callback_timeout', 'the silent job is unknown, not failed');
# the slot job 2 gave up let job 3 run; job 1 still holds its slot
my $t3 = $primary->safe_psql('postgres', q{SELECT token FROM job_state.claim('q', 'w3')});
isnt($t3, '', 'the slot given up by a waiting job is free');
is($primary->safe_psql('postgres', q{SELECT count(*) FROM job_state.claim('q', 'w4')}), '0',
	'the slot kept by a waiting job is held: the limit of 2 is reached');

# a standby, then a failover with job 1 still waiting
$primary->backup('base');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'base', has_streaming => 1);
$standby->start;
$primary->safe_psql('postgres', qq{SELECT job_state.heartbeat('$t1')});
$primary->wait_for_catchup($standby);
$primary->stop('immediate');
$standby->promote;
$standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or die 'standby was not promoted';

is($standby->safe_psql('postgres', q{SELECT status || ':' || generation FROM job_state.job WHERE id = 1}),
	'waiting:1', 'the waiting job survived the promotion');
# the late callback of job 2 (unknown) resolves it on the new primary
$standby->safe_psql('postgres', qq{SELECT job_state.succeed('$t2', '{"late": true}')});
is($standby->safe_psql('postgres', q{SELECT status || ':' || result FROM job_state.job WHERE id = 2}),
	'succeeded:{"late": true}', 'a callback after the timeout still resolves the job');
# job 1's callback: heartbeat, then succeed, twice (delivered twice)
is($standby->safe_psql('postgres', qq{SELECT cancel_requested FROM job_state.heartbeat('$t1')}),
	'f', 'the callback token heartbeats on the new primary');
$standby->safe_psql('postgres', qq{SELECT job_state.succeed('$t1', '{"approved": true}')});
$standby->safe_psql('postgres', qq{SELECT job_state.succeed('$t1', '{"approved": true}')});
is($standby->safe_psql('postgres', q{
	SELECT status || ':' || result || ':' || (SELECT count(*) FROM job_state.job_event e WHERE e.job_id = 1)
	  FROM job_state.job WHERE id = 1}),
	'succeeded:{"approved": true}:3', 'the callback completed the job once');
# a forged callback token is refused (the secret came along)
my $forged = substr($t1, 0, 42) . (substr($t1, 42, 1) eq 'A' ? 'Q' : 'A');
my ($ret, $out, $err) = $standby->psql('postgres', qq{SELECT job_state.succeed('$forged')});
like($err, qr/claim token is not valid/, 'a forged callback token is refused');
# the slots are all free again once job 3 is done
$standby->safe_psql('postgres', qq{SELECT job_state.succeed('$t3')});
is($standby->safe_psql('postgres', q{SELECT count(*) FROM job_state.slot WHERE job_id IS NOT NULL}),
	'0', 'no slot is left held');

$standby->stop;
done_testing();
