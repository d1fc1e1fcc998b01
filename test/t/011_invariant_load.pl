
# Invariants under load and faults.  For about 40 s, pgbench processes
# submit jobs (repeating idempotency keys, now and then with a different
# input) and work them: claim, heartbeat, record the business write as an
# operation, write it fenced by assert_claim, and succeed or fail at random;
# some workers stall past their lease before the business write or before
# completing.  Meanwhile the test terminates worker backends every second or
# so and once stops the server in immediate mode and starts it again; the
# processes that die are started again.
#
# Two queues: 'inv' (lease 1 s, an expired lease requeues the job) and
# 'lim' (concurrency limit 3, one running job per concurrency key, an
# expired lease makes the job unknown, so a late completion with the current
# generation is accepted).  Submits are paced below what the workers drain,
# so a requeued job is claimed again at once.
#
# Every step is recorded by the worker in its own transaction (what the
# claim returned, what the operation call answered, each completion accepted
# or refused with the token's generation and, for an accepted one, the
# history row it wrote), so that at the end plain SQL can check: every
# submitted key maps to one job and no job is lost; every job is in one
# state, the one its history ends in; no business write was made twice or
# outside its claim; no stale completion was accepted; attempts equal the
# claims (history and the workers' own record); no slot is held by a job
# that does not run.

use strict;
use warnings;

use IPC::Run;
use Time::HiRes qw(time usleep);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $load_seconds = 40;
my $lease = 1;					# seconds, both queues
my $stall = $lease + 0.5;		# a stalled worker sleeps this long
my $slow_work = 0.7;					# the work of a slow attempt, well within the lease

my $node = PostgreSQL::Test::Cluster->new('invariants');
$node->init;
$node->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'job_state'
job_state.sweep_interval = 200
max_connections = 40
});
$node->start;

$node->safe_psql(
	'postgres', qq{
CREATE EXTENSION job_state;
SELECT job_state.create_queue('inv', lease => '$lease s',
	on_lease_expiry => 'retry', retry_interval => '0.05 s',
	max_delay => '0.2 s', max_retries => 100000);
SELECT job_state.create_queue('lim', lease => '$lease s',
	on_lease_expiry => 'unknown', retry_interval => '0.05 s',
	max_delay => '0.2 s', max_retries => 100000,
	concurrency_limit => 3, per_key_limit => 1);

-- what submit returned for each key (one row per key)
CREATE TABLE submitted (
	key text PRIMARY KEY,
	queue text NOT NULL,
	job_id bigint NOT NULL,
	submits int NOT NULL DEFAULT 1,
	created int NOT NULL,
	other_job int NOT NULL DEFAULT 0);
-- every claim a worker got (a second claim of one generation fails the run)
CREATE TABLE claimed (
	job_id bigint,
	generation int,
	attempt int NOT NULL,
	worker text NOT NULL,
	PRIMARY KEY (job_id, generation));
-- the business write: at most once per operation
CREATE TABLE biz (
	op_id text PRIMARY KEY,
	job_id bigint NOT NULL,
	generation int NOT NULL,
	at timestamptz NOT NULL DEFAULT clock_timestamp());
-- every completion attempt; an accepted one with the history row it wrote
CREATE TABLE completion (
	id bigserial PRIMARY KEY,
	job_id bigint NOT NULL,
	generation int NOT NULL,
	kind text NOT NULL,
	accepted boolean NOT NULL,
	sqlstate text,
	ev_from text,
	ev_to text,
	ev_gen int,
	cur_status text,
	cur_gen int);
-- everything else a worker or submitter saw, one row each
CREATE TABLE seen (
	what text NOT NULL,
	job_id bigint,
	generation int,
	at timestamptz NOT NULL DEFAULT clock_timestamp());

CREATE FUNCTION s_submit(q text, k int, c int) RETURNS void
LANGUAGE plpgsql AS \$\$
DECLARE
	ikey text := q || '-' || k;
	ckey text := CASE WHEN q = 'lim' THEN 'c' || (k % 4) END;
	j record;
BEGIN
	IF c = 1 AND EXISTS (SELECT 1 FROM submitted s WHERE s.key = ikey) THEN
		-- the key exists (committed): another input must be refused
		BEGIN
			PERFORM job_state.submit(q, jsonb_build_object('k', k, 'other', true),
				idempotency_key => ikey, concurrency_key => ckey);
			INSERT INTO seen (what) VALUES ('conflicting input accepted');
		EXCEPTION WHEN SQLSTATE 'JS002' THEN
			INSERT INTO seen (what) VALUES ('submit refused JS002');
		END;
		RETURN;
	END IF;
	SELECT * INTO j FROM job_state.submit(q, jsonb_build_object('k', k),
		idempotency_key => ikey, concurrency_key => ckey);
	INSERT INTO submitted AS s (key, queue, job_id, created)
		VALUES (ikey, q, j.job_id, j.created::int)
		ON CONFLICT (key) DO UPDATE
		SET submits = s.submits + 1,
			created = s.created + EXCLUDED.created,
			other_job = s.other_job + (s.job_id <> EXCLUDED.job_id)::int;
END
\$\$;

CREATE FUNCTION w_claim(q text, w text, OUT got int, OUT token text)
LANGUAGE plpgsql AS \$\$
DECLARE
	c record;
BEGIN
	SELECT * INTO c FROM job_state.claim(q, w, max_jobs => 1);
	IF NOT FOUND THEN
		got := 0;
		token := '';
		RETURN;
	END IF;
	INSERT INTO claimed VALUES (c.job_id, job_state.token_generation(c.token),
								c.attempt, w);
	got := 1;
	token := c.token::text;
END
\$\$;

CREATE FUNCTION w_heartbeat(t job_state.claim_token) RETURNS void
LANGUAGE plpgsql AS \$\$
BEGIN
	PERFORM job_state.heartbeat(t, '$lease s');
EXCEPTION WHEN SQLSTATE 'JS001' THEN
	INSERT INTO seen VALUES ('heartbeat refused', job_state.token_job(t),
							 job_state.token_generation(t));
END
\$\$;

-- records the operation as started (its own transaction): new, done,
-- in_doubt, or stale when the token is refused
CREATE FUNCTION w_begin(t job_state.claim_token) RETURNS text
LANGUAGE plpgsql AS \$\$
DECLARE
	st text;
BEGIN
	SELECT state INTO st FROM job_state.begin_operation(t, 'biz-' || job_state.token_job(t));
	INSERT INTO seen VALUES ('operation ' || st, job_state.token_job(t),
							 job_state.token_generation(t));
	RETURN st;
EXCEPTION WHEN SQLSTATE 'JS001' THEN
	INSERT INTO seen VALUES ('operation refused', job_state.token_job(t),
							 job_state.token_generation(t));
	RETURN 'stale';
END
\$\$;

-- the business write, fenced by assert_claim, and the operation's end, in
-- one transaction; 1 when the worker may go on to complete the job
CREATE FUNCTION w_business(t job_state.claim_token, st text) RETURNS int
LANGUAGE plpgsql AS \$\$
DECLARE
	j bigint := job_state.token_job(t);
	g int := job_state.token_generation(t);
	op text := 'biz-' || j;
BEGIN
	IF st = 'stale' THEN
		RETURN 0;
	END IF;
	IF st = 'done' THEN
		RETURN 1;
	END IF;
	BEGIN
		PERFORM job_state.assert_claim(t);
		-- in doubt: ask the "external system" whether it was done
		IF st = 'new' OR NOT EXISTS (SELECT 1 FROM biz WHERE op_id = op) THEN
			INSERT INTO biz (op_id, job_id, generation) VALUES (op, j, g);
			INSERT INTO seen VALUES ('business write', j, g);
		END IF;
		PERFORM job_state.finish_operation(t, op, jsonb_build_object('generation', g));
		RETURN 1;
	EXCEPTION
		WHEN SQLSTATE 'JS001' THEN
			INSERT INTO seen VALUES ('business write refused', j, g);
			RETURN 0;
		WHEN unique_violation THEN
			INSERT INTO seen VALUES ('duplicate business write', j, g);
			RETURN 0;
	END;
END
\$\$;

CREATE FUNCTION w_complete(q text, t job_state.claim_token, r int) RETURNS void
LANGUAGE plpgsql AS \$\$
DECLARE
	j bigint := job_state.token_job(t);
	g int := job_state.token_generation(t);
	kind text := CASE WHEN r <= 70 OR r > 95 THEN 'succeed'
					  WHEN r <= 90 THEN 'transient' ELSE 'permanent' END;
	e record;
BEGIN
	IF kind = 'succeed' THEN
		PERFORM job_state.succeed(t, jsonb_build_object('generation', g));
	ELSE
		PERFORM job_state.fail(t, kind::job_state.error_class, '{"why": "random"}');
	END IF;
	-- our update holds the job row: its newest history row is ours
	SELECT from_status, to_status, generation INTO e
	  FROM job_state.job_event WHERE queue = q AND job_id = j
	 ORDER BY seq DESC LIMIT 1;
	INSERT INTO completion (job_id, generation, kind, accepted, ev_from, ev_to, ev_gen)
		VALUES (j, g, kind, true, e.from_status, e.to_status, e.generation);
EXCEPTION WHEN SQLSTATE 'JS001' THEN
	-- what the job had become
	INSERT INTO completion (job_id, generation, kind, accepted, sqlstate,
							cur_status, cur_gen)
		SELECT j, g, kind, false, 'JS001', status, generation
		  FROM job_state.job WHERE queue = q AND id = j;
END
\$\$;
});

my $dir = $node->basedir;
sub script
{
	my ($name, $text) = @_;
	my $path = "$dir/$name.sql";
	open my $fh, '>', $path or die "could not write $path: $!";
	print $fh $text;
	close $fh;
	return $path;
}

my $submit_script = script('submit', <<'EOS');
\set k random(1, :keys)
\set c random(1, 10)
SELECT s_submit(':q', :k, :c);
EOS

# r 1-4 stall after recording the operation, before the business write;
# 5-12 stall before completing.  Half the attempts work $slow_work s: a
# stalled worker then wakes while a newer claim of its job still runs, the
# case where only the generation tells the two apart
my $work_script = script('work', <<"EOS");
\\set r random(1, 100)
\\set slow random(1, 10)
SELECT got, token FROM w_claim(':q', ':w') \\gset
\\if :got
SELECT w_heartbeat(':token');
SELECT w_begin(':token') AS op \\gset
\\if :r <= 4
SELECT pg_catalog.pg_sleep($stall);
\\else
SELECT pg_catalog.pg_sleep(0.005);
\\endif
SELECT w_business(':token', ':op') AS ok \\gset
\\if :ok
\\if :r >= 5 and :r <= 12
SELECT pg_catalog.pg_sleep($stall);
\\elif :slow <= 5
SELECT pg_catalog.pg_sleep($slow_work);
\\endif
SELECT w_complete(':q', ':token', :r);
\\endif
\\else
\\sleep 50 ms
\\endif
EOS

# the load: one pgbench process of one client per role, started again when
# it dies (killed backend, server stop) while time is left
my @procs;
push @procs, { name => 'submit-inv', script => $submit_script,
	vars => [ 'q=inv', 'keys=900' ], rate => 12 };
push @procs, { name => 'submit-lim', script => $submit_script,
	vars => [ 'q=lim', 'keys=300' ], rate => 6 };
push @procs, { name => "work-inv-$_", script => $work_script,
	vars => [ 'q=inv', "w=inv$_" ] } for 1 .. 8;
push @procs, { name => "work-lim-$_", script => $work_script,
	vars => [ 'q=lim', "w=lim$_" ] } for 1 .. 3;

my $end = time + $load_seconds;
my ($spawns, $pgbench_errors, $error_text) = (0, 0, '');

sub spawn
{
	my ($p) = @_;
	my $left = int($end - time);
	return if $left < 1;
	my ($out, $err) = ('', '');
	$p->{out} = \$out;
	$p->{err} = \$err;
	my @cmd = ('pgbench', '-n', '--random-seed=rand', '-c', '1', '-T', $left,
		'-f', $p->{script},
		map { ('-D', $_) } @{ $p->{vars} });
	push @cmd, '-R', $p->{rate} if $p->{rate};
	push @cmd, '-h', $node->host, '-p', $node->port, 'postgres';
	# the name the fault injector looks for
	local $ENV{PGAPPNAME} = 'load';
	$p->{h} = IPC::Run::start(\@cmd, '>', $p->{out}, '2>', $p->{err});
	$spawns++;
}

# collect what a finished process said; an ERROR (not a FATAL of a
# terminated connection or a stopping server) is a failure
sub reap
{
	my ($p) = @_;
	$p->{h}->finish;
	for my $line (split /\n/, ${ $p->{err} })
	{
		next unless $line =~ /ERROR:/;
		$pgbench_errors++;
		$error_text .= "$p->{name}: $line\n" if length($error_text) < 4000;
	}
	$p->{h} = undef;
}

spawn($_) for @procs;
my ($kills, $restarts) = (0, 0);
my $next_kill = time + 1;
my $restart_at = time + $load_seconds * 0.45;
while (time < $end)
{
	for my $p (@procs)
	{
		if ($p->{h} && !$p->{h}->pumpable)
		{
			reap($p);
			usleep(100_000);	# a server that is down is not hammered
		}
		if ($p->{h})
		{
			$p->{h}->pump_nb;
		}
		else
		{
			spawn($p);
		}
	}
	if (time >= $next_kill)
	{
		# a random worker or submitter backend, preferably one in a statement
		# other than a stall (the stalls are left to end in a refusal)
		$kills += $node->safe_psql(
			'postgres', q{
			SELECT pg_catalog.count(*) FILTER (WHERE pg_catalog.pg_terminate_backend(pid))
			  FROM (SELECT pid FROM pg_catalog.pg_stat_activity
					 WHERE application_name = 'load'
					 ORDER BY query LIKE '%pg_sleep%', state = 'idle',
						   pg_catalog.random() LIMIT 1) b});
		$next_kill = time + 0.6 + rand(0.8);
	}
	if ($restart_at && time >= $restart_at)
	{
		$node->stop('immediate');
		$node->start;
		$restarts++;
		$restart_at = 0;
	}
	usleep(50_000);
}
for my $p (@procs)
{
	reap($p) if $p->{h};
}

is($pgbench_errors, 0, 'no worker or submitter statement raised an ERROR')
  or diag($error_text);
is($restarts, 1, 'the server was stopped (immediate) and started once');
cmp_ok($kills, '>', 10, "worker and submitter backends were terminated ($kills)");

# one figure or the count of rows that break an invariant
sub value
{
	return $node->safe_psql('postgres', shift);
}

my %seen = map { split /\|/ } split /\n/,
  value(q{SELECT what, pg_catalog.count(*) FROM seen GROUP BY what});
$seen{$_} //= 0 for (
	'submit refused JS002', 'conflicting input accepted',
	'duplicate business write', 'business write refused',
	'business write', 'operation in_doubt', 'operation done',
	'operation refused', 'heartbeat refused');

# -- every submitted key maps to exactly one job, none lost
my $jobs = value(q{SELECT pg_catalog.count(*) FROM job_state.job});
my $keys = value(q{SELECT pg_catalog.count(*) FROM submitted});
my $submits = value(q{SELECT pg_catalog.sum(submits) FROM submitted});
cmp_ok($submits, '>', $keys, "keys were submitted again ($submits submits of $keys keys)");
cmp_ok($seen{'submit refused JS002'}, '>', 0,
	"a key submitted again with another input was refused ($seen{'submit refused JS002'} times)");
is($seen{'conflicting input accepted'}, 0, 'no key was accepted with another input');
is( value(q{
	SELECT pg_catalog.count(*) FROM submitted s
	  LEFT JOIN job_state.job j ON j.queue = s.queue AND j.idempotency_key = s.key
	 WHERE j.id IS DISTINCT FROM s.job_id OR s.other_job <> 0 OR s.created <> 1}),
	'0',
	'every submitted key maps to one job: the same id on every submit, created once');
is($jobs, $keys, "no job lost: $keys keys whose submit committed, $jobs jobs");
is( value(q{
	SELECT pg_catalog.count(*) FROM job_state.job j
	 WHERE NOT EXISTS (SELECT 1 FROM submitted s WHERE s.job_id = j.id)}),
	'0', 'every job is one whose submit committed');

# -- every job in exactly one state: the one its history ends in
is( value(q{
	SELECT pg_catalog.count(*) - pg_catalog.count(DISTINCT id) FROM job_state.job}),
	'0', 'every job is one row');
is( value(q{
	SELECT pg_catalog.count(*) FROM job_state.job j
	  LEFT JOIN LATERAL (SELECT e.to_status, e.generation FROM job_state.job_event e
						  WHERE e.queue = j.queue AND e.job_id = j.id
						  ORDER BY e.seq DESC LIMIT 1) last ON true
	 WHERE COALESCE(last.to_status, 'accepted') IS DISTINCT FROM j.status
		OR COALESCE(last.generation, 0) IS DISTINCT FROM j.generation}),
	'0', "every job's status and generation are those its history ends in (accepted, 0 without history: the submit writes none)");
is( value(q{
	SELECT pg_catalog.count(*) FROM (
		SELECT from_status, pg_catalog.lag(to_status) OVER w AS prev,
			   pg_catalog.row_number() OVER w AS n, to_status
		  FROM job_state.job_event
		WINDOW w AS (PARTITION BY queue, job_id ORDER BY seq)) h
	 WHERE (n = 1 AND from_status IS DISTINCT FROM 'accepted')
		OR (n > 1 AND from_status IS DISTINCT FROM prev)}),
	'0', "every job's history is one unbroken chain from its submit (as accepted)");
my $by_status = value(q{
	SELECT pg_catalog.string_agg(status || ' ' || n, ', ' ORDER BY status)
	  FROM (SELECT status::text, pg_catalog.count(*) AS n FROM job_state.job GROUP BY 1) s});

# -- no duplicate business write, none outside its claim
is($seen{'duplicate business write'}, 0, 'no business write was attempted twice');
is( value(q{
	SELECT pg_catalog.count(*) FROM job_state.job j
	 WHERE j.status = 'succeeded'
	   AND NOT EXISTS (SELECT 1 FROM biz b WHERE b.op_id = 'biz-' || j.id AND b.job_id = j.id)}),
	'0', 'every succeeded job made its business write');
# a claim lasts from its start until the job leaves running or unknown
is( value(q{
	SELECT pg_catalog.count(*) FROM biz b
	  JOIN job_state.job j ON j.id = b.job_id
	 CROSS JOIN LATERAL (
		SELECT s.seq, s.at FROM job_state.job_event s
		 WHERE s.queue = j.queue AND s.job_id = j.id
		   AND s.to_status = 'running' AND s.generation = b.generation) st
	 WHERE b.at < st.at
		OR b.at > (SELECT pg_catalog.min(e.at) FROM job_state.job_event e
					WHERE e.queue = j.queue AND e.job_id = j.id AND e.seq > st.seq
					  AND e.to_status <> 'unknown')
		OR b.generation > j.generation}),
	'0', 'every business write was made while its claim was current');
is( value(q{
	SELECT pg_catalog.count(*) FROM biz b
	 WHERE NOT EXISTS (SELECT 1 FROM claimed c
						WHERE c.job_id = b.job_id AND c.generation = b.generation)}),
	'0', 'every business write belongs to a claim a worker got');

# -- no stale completion accepted
is( value(q{
	SELECT pg_catalog.count(*) FROM completion
	 WHERE accepted AND (ev_gen IS DISTINCT FROM generation
		OR ev_from NOT IN ('running', 'unknown')
		OR ev_to <> CASE kind WHEN 'succeed' THEN 'succeeded'
							  WHEN 'permanent' THEN 'failed' ELSE ev_to END)}),
	'0', 'every accepted completion carried the current generation of a running or unknown job');
is( value(q{
	SELECT pg_catalog.count(*) FROM (
		SELECT 1 FROM completion WHERE accepted
		 GROUP BY job_id, generation HAVING pg_catalog.count(*) > 1) d}),
	'0', 'no claim was completed twice');
is( value(q{
	SELECT pg_catalog.count(*) FROM job_state.job j
	 WHERE (j.status = 'succeeded') <> EXISTS (
		SELECT 1 FROM completion c
		 WHERE c.job_id = j.id AND c.accepted AND c.kind = 'succeed'
		   AND c.generation = j.generation)}),
	'0', "a job succeeded exactly when a succeed with its last generation was accepted");

# -- attempts equal the claims, in history and in the workers' record
is( value(q{
	SELECT pg_catalog.count(*) FROM job_state.job j
	 WHERE j.attempts <> (SELECT pg_catalog.count(*) FROM job_state.job_event e
						   WHERE e.queue = j.queue AND e.job_id = j.id
							 AND e.to_status = 'running')
		OR j.attempts <> (SELECT pg_catalog.count(*) FROM claimed c WHERE c.job_id = j.id)
		OR j.generation <> j.attempts}),
	'0', 'attempts equal the claims in job_event and the claims the workers got');

# -- slots
my $slot_sql = q{
	SELECT pg_catalog.count(*) FROM job_state.slot s
	  LEFT JOIN job_state.job j ON j.queue = s.queue AND j.id = s.job_id
	 WHERE s.job_id IS NOT NULL AND j.status IS DISTINCT FROM 'running'};
is(value($slot_sql), '0', 'no slot is held by a job that does not run');
is( value(q{
	SELECT pg_catalog.count(*) FROM job_state.job j
	 WHERE j.queue = 'lim' AND j.status = 'running'
	   AND (SELECT pg_catalog.count(*) FROM job_state.slot s
			 WHERE s.queue = j.queue AND s.job_id = j.id) <> 2}),
	'0', 'every running limited job holds its queue slot and its key slot');

# the figures
my %f = map { split /\|/ } split /\n/, value(q{
	SELECT 'claims', pg_catalog.count(*) FROM claimed
	UNION ALL SELECT 'accepted', pg_catalog.count(*) FROM completion WHERE accepted
	UNION ALL SELECT 'refused', pg_catalog.count(*) FROM completion WHERE NOT accepted
	UNION ALL SELECT 'newer', pg_catalog.count(*) FROM completion
	 WHERE NOT accepted AND cur_status = 'running' AND cur_gen > generation
	UNION ALL SELECT 'late', pg_catalog.count(*) FROM completion WHERE accepted AND ev_from = 'unknown'
	UNION ALL SELECT 'biz', pg_catalog.count(*) FROM biz
	UNION ALL SELECT 'retried', pg_catalog.count(*) FROM job_state.job WHERE attempts > 1});
cmp_ok($f{refused}, '>', 0, "stale completions were refused ($f{refused})");
cmp_ok($f{newer}, '>', 0,
	"stale completions were refused while a newer claim of their job ran ($f{newer})");
cmp_ok($seen{'business write refused'}, '>', 0,
	"stale business writes were refused ($seen{'business write refused'})");
cmp_ok($f{retried}, '>', 0, "jobs were claimed again ($f{retried})");
diag(
	sprintf(
		"invariant load (%d s): %d jobs (%s) from %d submits of %d keys "
		  . "(%d refused with another input); %d claims; completions %d accepted "
		  . "(%d late, from unknown), %d refused as stale (%d while a newer claim "
		  . "ran); business writes %d (%d refused as stale, %d duplicate; operations %d done, %d in doubt, "
		  . "%d refused); heartbeats refused %d; %d backends terminated, "
		  . "%d restart (immediate stop), %d pgbench processes started",
		$load_seconds, $jobs, $by_status, $submits, $keys,
		$seen{'submit refused JS002'}, $f{claims}, $f{accepted}, $f{late},
		$f{refused}, $f{newer}, $f{biz}, $seen{'business write refused'},
		$seen{'duplicate business write'}, $seen{'operation done'},
		$seen{'operation in_doubt'}, $seen{'operation refused'},
		$seen{'heartbeat refused'}, $kills, $restarts, $spawns));

# once every lease has run out, no slot is held at all
usleep(($lease + 0.3) * 1_000_000);
value('SELECT job_state.sweep()');
is( value(q{
	SELECT pg_catalog.count(*) FROM job_state.slot WHERE job_id IS NOT NULL}),
	'0', 'once the leases ran out no slot is held');
is( value(q{
	SELECT pg_catalog.count(*) FROM job_state.job WHERE status = 'running'}),
	'0', 'and no job runs');

$node->stop;
done_testing();
