# The README's Python worker loop runs as it stands: the ```python block
# that follows the line "<!-- test/t/030_readme_worker.pl runs the next
# block -->" in README.md is executed by the system's python3 with the
# psycopg it has (Debian 12: python3-psycopg 3.1.7; trixie and sid: 3.2 or
# later), against a real cluster, with stubs only for the names the README
# says stand for your own code (queue, worker_name, payments, save_receipt,
# RateLimited, Timeout, PermanentError).
#
# It checks that the loop
# - sleeps between claims and is woken by a submit long before its 5 s poll
#   (three times, each submitted while it sleeps);
# - completes a job with its own writes (save_receipt) in one transaction;
# - takes each of its documented branches: throttled and transient retry
#   (and the next attempt finds the operation in doubt and looks it up),
#   permanent, unknown (a timeout), and a stale claim (another worker took
#   the job over after the lease ran out: the README's worker drops the work
#   and writes nothing);
# - never dies (an exception out of the loop fails the test, with the
#   README line it came from).
#
# Without python3 and psycopg it skips, unless JS_TEST_REQUIRE (tools/test
# sets it) names psycopg.
use strict;
use warnings;

use File::Basename qw(dirname);
use File::Spec;
use IPC::Run;
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $python = $ENV{JS_PYTHON} // (-x '/usr/bin/python3' ? '/usr/bin/python3' : 'python3');
my $psycopg = '';
IPC::Run::run([ $python, '-c', 'import psycopg; print(psycopg.__version__)' ],
	'<', \undef, '>', \$psycopg, '2>', \my $err);
chomp $psycopg;
if ($? != 0 || $psycopg eq '')
{
	my $why = "$python cannot import psycopg (Debian: python3-psycopg, which tools/deps installs)";
	if (($ENV{JS_TEST_REQUIRE} // '') =~ /\bpsycopg\b/)
	{
		fail($why);
		done_testing();
		exit 0;
	}
	plan skip_all => $why;
}
note("psycopg $psycopg");

# --- the block -------------------------------------------------------------

my $readme = File::Spec->catfile(dirname(__FILE__), '..', '..', 'README.md');
open my $fh, '<', $readme or die "cannot open $readme: $!";
my @lines = <$fh>;
close $fh;

my ($start, @block);
for my $i (0 .. $#lines)
{
	next unless $lines[$i] =~ /^<!-- test\/t\/030_readme_worker\.pl runs the next block -->\s*$/;
	die "README.md line " . ($i + 2) . ": no ```python block after the marker"
	  unless ($lines[ $i + 1 ] // '') =~ /^```python\s*$/;
	$start = $i + 3;    # README line of the block's first line
	for my $j ($i + 2 .. $#lines)
	{
		last if $lines[$j] =~ /^```\s*$/;
		push @block, $lines[$j];
	}
	last;
}
ok(defined $start, 'README.md marks the worker loop for this test') or BAIL_OUT('no block');
ok(scalar(grep { /job_state\.claim/ } @block), 'the marked block is the worker loop');

my $dir = PostgreSQL::Test::Utils::tempdir;
{
	open my $out, '>', "$dir/worker_block.py" or die;
	# the README's line numbers in tracebacks
	print $out "\n" x ($start - 1), @block;
	close $out;
}

# The stubs, then the block.  Each input names a case; payments.charge
# behaves by it, once per job (a second attempt finds the operation in
# doubt and calls payments.lookup).  What happens is printed as one line
# of JSON per event, read by the test from the harness's output.
my $harness = <<'PY';
import json, sys, time
import psycopg

def event(**kw):
    print(json.dumps(kw), flush=True)

class RateLimited(Exception):
    def __init__(self, body, retry_after):
        self.body, self.retry_after = body, retry_after

class Timeout(Exception):
    pass

class PermanentError(Exception):
    def __init__(self, body):
        self.body = body

class Payments:
    def charge(self, job_input, idempotency_key):
        case = job_input["case"]
        event(call="charge", case=case, n=job_input["n"], key=idempotency_key)
        if case == "throttled":
            raise RateLimited({"http_status": 429}, 1)
        if case == "transient":
            raise ConnectionResetError("peer went away")
        if case == "permanent":
            raise PermanentError({"http_status": 402})
        if case == "timeout":
            raise Timeout()
        if case == "stale":
            self.take_over(idempotency_key.split(":")[0])
        return {"charged": job_input["n"], "by": "readme"}

    def lookup(self, idempotency_key):
        event(call="lookup", key=idempotency_key)
        return {"charged": "looked-up", "by": "readme"}

    def take_over(self, job_id):
        # another worker, after this claim's lease ran out: expire it, claim
        # the job again and succeed it; the README's worker then holds a
        # stale token
        with psycopg.connect("dbname=app", autocommit=True) as other:
            deadline = time.time() + 30
            while time.time() < deadline:
                other.execute("SELECT job_state.sweep()")
                row = other.execute(
                    "SELECT token::text FROM job_state.claim('payments', 'usurper') "
                    "WHERE job_id = %s", (int(job_id),)).fetchone()
                if row:
                    other.execute("SELECT job_state.succeed(%s, '{\"by\": \"usurper\"}')",
                                  (row[0],))
                    event(call="take_over", job_id=int(job_id))
                    return
                time.sleep(0.2)
            event(call="take_over_failed", job_id=int(job_id))

def save_receipt(conn, job_input, result):
    conn.execute("INSERT INTO receipts (n, job_case, result) VALUES (%s, %s, %s)",
                 (job_input["n"], job_input["case"], json.dumps(result)))

queue = "payments"
worker_name = "readme-worker"
payments = Payments()
event(call="start")
path = sys.argv[1]
code = compile(open(path).read(), "README.md", "exec")
exec(code, {"__name__": "readme_worker", "queue": queue, "worker_name": worker_name,
            "payments": payments, "save_receipt": save_receipt,
            "RateLimited": RateLimited, "Timeout": Timeout,
            "PermanentError": PermanentError})
PY
{
	open my $out, '>', "$dir/harness.py" or die;
	print $out $harness;
	close $out;
}

# --- the cluster -----------------------------------------------------------

my $node = PostgreSQL::Test::Cluster->new('readme_worker');
$node->init;
$node->start;
$node->safe_psql('postgres', 'CREATE DATABASE app');
# a 2 s lease, so that the stale case's take-over comes soon; retries after
# 0.1 s at most
$node->safe_psql(
	'app', q{
CREATE EXTENSION job_state;
SELECT job_state.create_queue('payments', lease => '2 s', on_lease_expiry => 'retry',
                              retry_interval => '50 ms', max_delay => '100 ms');
CREATE TABLE receipts (n int PRIMARY KEY, job_case text NOT NULL, result jsonb NOT NULL);
});

my ($out, $errout) = ('', '');
my $worker;
{
	local $ENV{PGHOST} = $node->host;
	local $ENV{PGPORT} = $node->port;
	local $ENV{PGAPPNAME} = 'readme-worker';
	$worker = IPC::Run::start([ $python, "$dir/harness.py", "$dir/worker_block.py" ],
		'<', \undef, '>', \$out, '2>', \$errout);
}

# reads what the worker printed so far, while it runs
sub pump
{
	$worker->pump_nb if $worker->pumpable;
}

sub submit
{
	my ($n, $case) = @_;
	return $node->safe_psql('app',
		"SELECT job_id FROM job_state.submit('payments', '{\"n\": $n, \"case\": \"$case\"}')");
}

# the worker asleep between claims: its last statement was the claim, and
# it is idle; false at once when the worker has ended
sub asleep
{
	my $t0 = time;
	while (time - $t0 < $PostgreSQL::Test::Utils::timeout_default)
	{
		pump();
		return 0 unless $worker->pumpable;
		return 1
		  if $node->safe_psql(
			'app', q{
SELECT count(*) = 1 FROM pg_stat_activity
 WHERE application_name = 'readme-worker' AND state = 'idle'
   AND query LIKE '%job_state.claim%'}) eq 't';
		usleep(50_000);
	}
	return 0;
}

# a worker that ended: the test stops here, with what it printed
sub alive_or_stop
{
	my $what = shift;
	pump();
	return if $worker->pumpable;
	$worker->finish;
	fail("the README worker is still running ($what)");
	diag("the README worker ended (exit status " . ($? >> 8) . "):\n$errout");
	$node->stop;
	done_testing();
	exit 0;
}

sub status_of
{
	my $id = shift;
	return $node->safe_psql('app', "SELECT status FROM job_state.job WHERE queue = 'payments' AND id = $id");
}

sub wait_final
{
	my ($id, $secs) = @_;
	my $t0 = time;
	while (time - $t0 < $secs)
	{
		pump();
		my $s = status_of($id);
		return ($s, time - $t0)
		  if $s =~ /^(succeeded|failed|cancelled|unknown)$/;
		usleep(20_000);
	}
	return (status_of($id), time - $t0);
}

ok(asleep(), 'the README worker claims, finds nothing and sleeps');
alive_or_stop('after its first claim');

# woken by each submit, long before the 5 s poll
my $n = 0;
for my $round (1 .. 3)
{
	ok(asleep(), "round $round: the worker is asleep between claims");
	alive_or_stop("round $round");
	usleep(300_000);
	my $id = submit(++$n, 'ok');
	my ($s, $took) = wait_final($id, 20);
	is($s, 'succeeded', "round $round: the job submitted while the worker slept succeeded");
	cmp_ok($took, '<', 3, "round $round: the wake-up came, not the 5 s poll")
	  or diag(sprintf('took %.2f s', $took));
}

# every branch of the loop; the stale case last and alone, as its
# take-over claims whatever job is ready
my %id;
for my $case (qw(ok throttled transient permanent timeout))
{
	$id{$case} = submit(++$n, $case);
}
for my $case (qw(ok throttled transient permanent timeout))
{
	wait_final($id{$case}, 60);
}
$id{stale} = submit(++$n, 'stale');
my %want = (
	ok => 'succeeded',
	throttled => 'succeeded',
	transient => 'succeeded',
	permanent => 'failed',
	timeout => 'unknown',
	stale => 'succeeded');
for my $case (sort keys %want)
{
	my ($s) = wait_final($id{$case}, 60);
	is($s, $want{$case}, "case $case: the job ends $want{$case}");
}
pump();

my $rows = $node->safe_psql(
	'app', q{
SELECT i.input->>'case', j.attempts, coalesce(j.reason, ''), coalesce(j.result::text, ''),
       coalesce(r.result::text, '-')
  FROM job_state.job j
  CROSS JOIN LATERAL (SELECT j.input) i
  LEFT JOIN receipts r ON r.n = (j.input->>'n')::int
 WHERE j.queue = 'payments' AND (j.input->>'n')::int > 3
 ORDER BY (j.input->>'n')::int});
my %row = map { my @f = split /\|/; ($f[0] => \@f) } split /\n/, $rows;
note($rows);

is_deeply($row{ok}, [ 'ok', 1, '', '{"by": "readme", "charged": 4}', '{"by": "readme", "charged": 4}' ],
	'ok: succeeded at the first attempt, the result and the receipt written together');
is_deeply($row{throttled},
	[ 'throttled', 2, '', '{"by": "readme", "charged": "looked-up"}', '{"by": "readme", "charged": "looked-up"}' ],
	'throttled: retried; the next attempt found the charge in doubt and looked it up');
is_deeply($row{transient},
	[ 'transient', 2, '', '{"by": "readme", "charged": "looked-up"}', '{"by": "readme", "charged": "looked-up"}' ],
	'transient: retried; the next attempt found the charge in doubt and looked it up');
is_deeply($row{permanent}, [ 'permanent', 1, 'permanent_error', '', '-' ],
	'permanent: failed with permanent_error, no receipt');
is_deeply($row{timeout}, [ 'timeout', 1, 'outcome_unknown', '', '-' ],
	'timeout: unknown (outcome_unknown), no receipt');
is_deeply($row{stale}, [ 'stale', 2, '', '{"by": "usurper"}', '-' ],
	'stale: the newer claim\'s outcome stands; the README worker wrote nothing with its stale token');

my @events = map { JSON::PP::decode_json($_) } grep { /^\{/ } split /\n/, $out;
is(scalar(grep { ($_->{call} // '') eq 'take_over' } @events), 1, 'the take-over happened');
is(scalar(grep { ($_->{call} // '') eq 'lookup' } @events), 2,
	'payments.lookup was called for the two jobs in doubt, and only for them');
is(scalar(grep { ($_->{call} // '') eq 'charge' } @events), 9,
	'payments.charge was called once per job, never again for a job in doubt');

ok($worker->pumpable, 'the README worker is still running (no exception left its loop)')
  or diag("worker stderr:\n$errout");
$worker->kill_kill;
is($errout, '', 'the README worker printed nothing on stderr') or diag($errout);

$node->stop;
done_testing();
