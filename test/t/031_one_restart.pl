# Turning the background workers on takes one restart, done as the README
# says (section "Background workers"), both ways it documents:
#
# - the postgresql.conf lines: the block after the line "<!--
#   test/t/031_one_restart.pl runs the next block -->" is appended to
#   postgresql.conf as it stands;
# - the psql way: the ```sql block after the readme-test skip comment that
#   names this file runs in a new psql session (ALTER SYSTEM SET
#   shared_preload_libraries, LOAD 'job_state', ALTER SYSTEM SET
#   job_state.database), as a superuser would type it;
#
# each on a fresh cluster whose database app has the extension, followed by
# exactly one restart, after which the sweeper and the notifier run in app
# (pg_stat_activity.backend_type) and the sweeper says so in the log.
#
# Guards src/job_state.c's definition of job_state.database in a session
# that loaded the library without preloading it: before it, ALTER SYSTEM
# SET job_state.database was refused until the library was preloaded.
use strict;
use warnings;

use File::Basename qw(dirname);
use File::Spec;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $readme = File::Spec->catfile(dirname(__FILE__), '..', '..', 'README.md');
open my $fh, '<', $readme or die "cannot open $readme: $!";
my @lines = <$fh>;
close $fh;

# the body of the fenced block on the line after line $i (0-based), and the
# README line of its fence
sub block_after
{
	my ($i, $lang) = @_;
	my $fence = $lines[ $i + 1 ] // '';
	die "README.md line " . ($i + 2) . ": expected a ```$lang block\n"
	  unless $fence =~ /^```\Q$lang\E\s*$/;
	my @body;
	for my $j ($i + 2 .. $#lines)
	{
		return (join('', @body), $i + 2) if $lines[$j] =~ /^```\s*$/;
		push @body, $lines[$j];
	}
	die "README.md line " . ($i + 2) . ": the block is never closed\n";
}

my ($conf, $conf_line, $sql, $sql_line);
for my $i (0 .. $#lines)
{
	if ($lines[$i] =~ /^<!-- test\/t\/031_one_restart\.pl runs the next block -->\s*$/)
	{
		($conf, $conf_line) = block_after($i, '');
	}
	elsif ($lines[$i] =~ /^<!-- readme-test: skip: .*031_one_restart\.pl.* -->\s*$/)
	{
		($sql, $sql_line) = block_after($i, 'sql');
	}
}
ok(defined $conf, 'README.md has the postgresql.conf lines for this test');
ok(defined $sql, 'README.md has the psql steps for this test');
BAIL_OUT('blocks missing') unless defined $conf && defined $sql;
like($conf, qr/shared_preload_libraries/, 'the postgresql.conf lines preload job_state');
like($sql, qr/ALTER SYSTEM SET job_state\.database/, 'the psql steps set job_state.database');

# a cluster like a fresh installation, with job_state created in app
sub fresh
{
	my $name = shift;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init;
	$node->start;
	$node->safe_psql('postgres', 'CREATE DATABASE app');
	$node->safe_psql('app', 'CREATE EXTENSION job_state');
	return $node;
}

sub workers_in_app
{
	my ($node, $how) = @_;
	ok( $node->poll_query_until(
			'postgres', q{
SELECT string_agg(backend_type || ' in ' || datname, ', ' ORDER BY backend_type)
  FROM pg_stat_activity WHERE backend_type LIKE 'job_state%'},
			'job_state notifier in app, job_state sweeper in app'),
		"$how: after one restart the sweeper and the notifier run in app");
	ok( $node->wait_for_log(qr/job_state sweeper started in database "app"/),
		"$how: the sweeper logged that it serves app");
}

# 1. the postgresql.conf lines
{
	my $node = fresh('conf');
	$node->append_conf('postgresql.conf', $conf);
	$node->restart;
	workers_in_app($node, "postgresql.conf (README.md line $conf_line)");
	$node->stop;
}

# 2. the psql steps, in a session of their own
{
	my $node = fresh('alter_system');
	my ($ret, $out, $err) = $node->psql('postgres', $sql, on_error_stop => 1);
	is($ret, 0, "the psql steps (README.md line $sql_line) run without an error")
	  or diag($err);
	is($err, '', 'and without a warning');
	$node->restart;
	workers_in_app($node, "ALTER SYSTEM (README.md line $sql_line)");

	# the setting is the preloaded one now: a restart to change it
	($ret, $out, $err) = $node->psql('app', 'SET job_state.database = \'postgres\'');
	like($err, qr/cannot be changed without restarting the server/,
		'preloaded, job_state.database still changes only at a restart');
	$node->stop;
}

# 3. without preloading, a session that loaded the library can write
# job_state.database and job_state.claim_frontiers with ALTER SYSTEM, cannot
# SET them, and still refuses a misspelt job_state.* name
{
	my $node = fresh('unloaded');
	my ($ret, $out, $err) = $node->psql(
		'app', q{
LOAD 'job_state';
ALTER SYSTEM SET job_state.claim_frontiers = 16;
ALTER SYSTEM RESET job_state.claim_frontiers;
});
	is($ret, 0, 'after LOAD, ALTER SYSTEM takes job_state.claim_frontiers') or diag($err);
	($ret, $out, $err) = $node->psql('app', "LOAD 'job_state'; SET job_state.database = 'x'");
	like($err, qr/cannot be changed now/, 'SET job_state.database is refused in a session');
	($ret, $out, $err) = $node->psql('app', "LOAD 'job_state'; ALTER SYSTEM SET job_state.databse = 'x'");
	like($err, qr/job_state\.databse/, 'a misspelt job_state.* name is still refused');
	$node->stop;
}

done_testing();
