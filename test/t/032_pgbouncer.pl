# Workers through PgBouncer in transaction mode (README.md, "Connection
# poolers"): six worker processes (Python, psycopg with prepare_threshold
# None, as the README says) share a pool of two server connections; they
# claim, heartbeat, begin and finish an operation and succeed with their
# own write in one transaction.  A few jobs are slow on their first attempt,
# past the lease, so another worker takes them over and the first one's
# token is stale.  A client submits a job through the pooler and waits for
# it with CALL job_state.wait().
#
# Checks: every job succeeded exactly once (one receipt, written by the
# attempt whose result the job holds), every operation happened once, each
# slow job's first token was refused (JS001) and nothing of it was
# written, and wait() returned the outcome through the pooler while it held
# one of the two server connections.
#
# PgBouncer runs from this test, on a Unix socket only (no TCP), and is
# stopped by its pid at the end.  Without pgbouncer, python3 or psycopg the
# test skips, unless JS_TEST_REQUIRE (tools/test sets it) names pgbouncer.
use strict;
use warnings;

use IPC::Run;
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $required = ($ENV{JS_TEST_REQUIRE} // '') =~ /\bpgbouncer\b/;

sub missing
{
	my $why = shift;
	if ($required)
	{
		fail($why);
		done_testing();
		exit 0;
	}
	plan skip_all => $why;
}

my ($pgbouncer) = grep { -x $_ } ($ENV{JS_PGBOUNCER} // (),
	'/usr/sbin/pgbouncer', '/usr/bin/pgbouncer', '/usr/local/bin/pgbouncer');
missing('pgbouncer is not installed (Debian: pgbouncer, which tools/deps installs)')
  unless $pgbouncer;
my $python = $ENV{JS_PYTHON} // (-x '/usr/bin/python3' ? '/usr/bin/python3' : 'python3');
IPC::Run::run([ $python, '-c', 'import psycopg' ], '<', \undef, '>', \my $o, '2>', \my $e);
missing("$python cannot import psycopg (Debian: python3-psycopg)") if $? != 0;
my $version = `$pgbouncer --version 2>&1`;
note($version);

my $jobs = 60;
my $slow = 3;         # jobs whose first attempt outlasts the lease
my $workers = 6;
my $pool = 2;

my $node = PostgreSQL::Test::Cluster->new('pgbouncer');
$node->init;
$node->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'job_state'
job_state.database = 'postgres'
});
$node->start;
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION job_state;
SELECT job_state.create_queue('pooled', lease => '2 s', on_lease_expiry => 'retry',
                              retry_interval => '50 ms', max_delay => '100 ms', max_retries => 10);
CREATE TABLE receipts (job_id bigint NOT NULL, worker text NOT NULL, attempt int NOT NULL);
CREATE TABLE effects (job_id bigint NOT NULL, worker text NOT NULL, attempt int NOT NULL);
});

# --- PgBouncer, transaction mode, on a Unix socket only --------------------

my $dir = PostgreSQL::Test::Utils::tempdir_short;
my $bport = PostgreSQL::Test::Cluster::get_free_port();
my $user = getpwuid($<);
{
	open my $f, '>', "$dir/userlist.txt" or die;
	print $f qq{"$user" ""\n};
	close $f;
	open $f, '>', "$dir/pgbouncer.ini" or die;
	print $f <<"INI";
[databases]
postgres = host=@{[ $node->host ]} port=@{[ $node->port ]} dbname=postgres

[pgbouncer]
listen_addr =
listen_port = $bport
unix_socket_dir = $dir
auth_type = trust
auth_file = $dir/userlist.txt
pool_mode = transaction
default_pool_size = $pool
min_pool_size = 0
reserve_pool_size = 0
max_client_conn = 50
ignore_startup_parameters = extra_float_digits
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
INI
	close $f;
}
my ($bout, $berr) = ('', '');
my $bouncer = IPC::Run::start([ $pgbouncer, "$dir/pgbouncer.ini" ],
	'<', \undef, '>', \$bout, '2>', \$berr);
my $bouncer_pid = $bouncer->{KIDS}[0]{PID};
END
{
	# stopped by its pid, whatever happened
	kill 'INT', $bouncer_pid if $bouncer_pid && kill 0, $bouncer_pid;
}
my $bdsn = "host=$dir port=$bport dbname=postgres user=$user";
my $up = 0;
for (1 .. 100)
{
	if (-S "$dir/.s.PGSQL.$bport")
	{
		$up = 1;
		last;
	}
	usleep(100_000);
}
ok($up, 'pgbouncer listens on its Unix socket') or diag("$bout\n$berr");
is(scalar(grep { /:$bport\b/ } `ss -ltn 2>/dev/null`), 0, 'and on no TCP port');

# --- the workers and the waiting client ------------------------------------

my $py = <<'PY';
import json, sys, time
import psycopg
from psycopg.types.json import Jsonb

role, name, dsn = sys.argv[1], sys.argv[2], sys.argv[3]

def say(**kw):
    kw["who"] = name
    print(json.dumps(kw), flush=True)

# through a transaction-mode pooler: no server-side prepared statements
conn = psycopg.connect(dsn, autocommit=True, prepare_threshold=None)

if role == "client":
    # submits through the pooler, then waits for the outcome in one CALL
    job_id = conn.execute("SELECT job_id FROM job_state.submit('pooled', %s)",
                          (Jsonb({"waited": True}),)).fetchone()[0]
    t0 = time.time()
    status, result = conn.execute(
        "CALL job_state.wait(%s, '60 s', NULL, NULL, NULL, NULL, NULL)",
        (job_id,)).fetchone()[:2]
    say(waited=job_id, status=status, result=result, secs=time.time() - t0)
    sys.exit(0)

deadline = time.time() + 120
while time.time() < deadline:
    row = conn.execute("SELECT token::text, job_id, attempt, input "
                       "FROM job_state.claim('pooled', %s)", (name,)).fetchone()
    if row is None:
        left = conn.execute("SELECT count(*) FROM job_state.job WHERE queue = 'pooled' "
                            "AND status NOT IN ('succeeded', 'failed', 'cancelled', 'unknown')"
                            ).fetchone()[0]
        if left == 0:
            break
        time.sleep(0.02)
        continue
    token, job_id, attempt, job_input = row
    try:
        conn.execute("SELECT * FROM job_state.heartbeat(%s)", (token,))
        state, result = conn.execute("SELECT state, result FROM "
                                     "job_state.begin_operation(%s, 'effect')",
                                     (token,)).fetchone()
        if state == "new":
            conn.execute("INSERT INTO effects VALUES (%s, %s, %s)", (job_id, name, attempt))
        if state != "done":
            conn.execute("SELECT job_state.finish_operation(%s, 'effect', %s)",
                         (token, Jsonb({"by": name})))
        if job_input.get("slow") and attempt == 1:
            time.sleep(4)                     # past the 2 s lease: taken over
        with conn.transaction():
            conn.execute("SELECT job_state.assert_claim(%s)", (token,))
            conn.execute("INSERT INTO receipts VALUES (%s, %s, %s)", (job_id, name, attempt))
            conn.execute("SELECT job_state.succeed(%s, %s)",
                         (token, Jsonb({"worker": name, "attempt": attempt})))
        say(succeeded=job_id, attempt=attempt)
    except psycopg.Error as e:
        if e.sqlstate != "JS001":
            raise
        say(stale=job_id, attempt=attempt)
say(done=True)
PY
{
	open my $f, '>', "$dir/pooled.py" or die;
	print $f $py;
	close $f;
}

$node->safe_psql('postgres',
	"SELECT job_state.submit('pooled', jsonb_build_object('n', n, 'slow', n <= $slow))"
	  . " FROM generate_series(1, $jobs) n");

my (@procs, @outs, @errs);
for my $i (0 .. $workers)
{
	my $role = $i == $workers ? 'client' : 'worker';
	my $name = $i == $workers ? 'client' : "w$i";
	($outs[$i], $errs[$i]) = ('', '');
	$procs[$i] = IPC::Run::start([ $python, "$dir/pooled.py", $role, $name, $bdsn ],
		'<', \undef, '>', \$outs[$i], '2>', \$errs[$i],
		IPC::Run::timeout(180));
}
# at most two server connections at any time, polled while they work
my $most = 0;
my $t0 = time;
while (grep { $_->pumpable } @procs)
{
	$_->pump_nb for grep { $_->pumpable } @procs;
	my $n = $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE true"
		  . " AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
		  . " AND usename = current_user AND datname = 'postgres'");
	$most = $n if $n > $most;
	last if time - $t0 > 170;
	usleep(100_000);
}
my $clean = 1;
for my $i (0 .. $#procs)
{
	$procs[$i]->finish or $clean = 0;
	is($errs[$i], '', "process $i printed nothing on stderr") or diag($errs[$i]);
}
ok($clean, 'every worker and the client ended with status 0');
cmp_ok($most, '<=', $pool, "the workers shared at most $pool server connections (most seen: $most)");

my @ev = map { decode_json($_) } grep { /^\{/ } map { split /\n/ } @outs;
my @stale = grep { exists $_->{stale} } @ev;
my ($waited) = grep { exists $_->{waited} } @ev;

# every job, once
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FILTER (WHERE status = 'succeeded') || ' of ' || count(*)
  FROM job_state.job WHERE queue = 'pooled'}),
	($jobs + 1) . ' of ' . ($jobs + 1),
	'every job succeeded');
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM job_state.job j
 WHERE j.queue = 'pooled'
   AND (SELECT count(*) FROM receipts r WHERE r.job_id = j.id) <> 1}),
	'0', 'every job has exactly one receipt');
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM job_state.job j JOIN receipts r ON r.job_id = j.id
 WHERE j.queue = 'pooled'
   AND (r.attempt <> j.attempts OR j.result->>'worker' <> r.worker
        OR (j.result->>'attempt')::int <> r.attempt)}),
	'0', 'each receipt is from the attempt whose result the job holds (its latest)');
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM job_state.job j
 WHERE j.queue = 'pooled'
   AND (SELECT count(*) FROM effects f WHERE f.job_id = j.id) <> 1}),
	'0', 'every operation happened exactly once');

# the stale claims
is( $node->safe_psql(
		'postgres', qq{
SELECT count(*) FROM job_state.job
 WHERE queue = 'pooled' AND (input->>'slow')::bool AND attempts >= 2}),
	$slow, "the $slow slow jobs were taken over");
cmp_ok(scalar(grep { $_->{attempt} == 1 } @stale), '>=', $slow,
	'the first attempt of each slow job was refused (JS001)');
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM receipts r JOIN job_state.job j ON j.id = r.job_id
 WHERE j.queue = 'pooled' AND (j.input->>'slow')::bool AND r.attempt = 1}),
	'0', 'nothing was written with a stale token');

# wait() through the pooler
ok($waited, 'the client waited through the pooler') or diag(join "\n", @outs);
is($waited->{status} // '', 'succeeded', 'wait() returned the outcome: succeeded');
ok(ref $waited->{result} eq 'HASH' && $waited->{result}{worker},
	'wait() returned the result');
cmp_ok($waited->{secs} // 99, '<', 60, 'wait() returned before its timeout');

$bouncer->signal('INT');
$bouncer->finish;
ok(!kill(0, $bouncer_pid), 'pgbouncer stopped');
$bouncer_pid = undef;
$node->stop;
done_testing();
