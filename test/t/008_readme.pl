# The README is executable: every ```sql block of README.md runs, in the
# order it appears, in one psql session against a fresh database, and the
# ```text block that follows a ```sql block is compared with what psql
# printed for it.
#
# Conventions (also described in README.md, "Running the tests"):
#
# - A ```sql block is run as written, with psql's ON_ERROR_STOP: an error, or
#   a WARNING, fails the test naming the block's line in README.md (and the
#   line of the failing statement).  Blocks share the session, so psql
#   variables set with \gset in one block (tokens, job ids) are there in the
#   next.  Every block must end its last statement (a ";" or a backslash
#   command such as \gset), so that no statement runs on into the next one.
# - A ```text block right after a ```sql block (nothing but blank lines in
#   between) is that block's output: psql's default (aligned) output with
#   command tags, as psql -f prints it, TimeZone UTC.  Trailing blanks of a
#   line and blank lines at the start and end are not compared.  A ```text
#   block anywhere else is an error (use a plain ``` fence for other text).
# - A block that truly cannot run here is preceded by an HTML comment that
#   says why:  <!-- readme-test: skip: pg_cron is not installed here -->
#   (a skip without a reason is an error).  Skipped blocks are listed.
#
# The test cluster runs as the cluster's superuser, without preloading
# job_state, so the sweeper cannot change jobs between two examples.
use strict;
use warnings;

use File::Basename qw(dirname);
use File::Spec;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $readme = File::Spec->catfile(dirname(__FILE__), '..', '..', 'README.md');
open my $fh, '<', $readme or die "cannot open $readme: $!";
my @lines = <$fh>;
close $fh;
chomp @lines;

# --- the blocks of README.md -------------------------------------------------

my @sql;           # { line, body => [...], skip => reason, output => block }
my @problems;      # mistakes in the README's use of the conventions
my $open;          # the fenced block being read
my $after_sql;     # the last ```sql block, while only blank lines followed it
my $skip;          # [reason, line] of a skip comment waiting for its block

for my $i (0 .. $#lines)
{
	my $n = $i + 1;
	my $l = $lines[$i];

	if ($open)
	{
		if ($l =~ /^\s*```\s*$/)
		{
			$after_sql = $open->{lang} eq 'sql' ? $open : undef;
			$open = undef;
		}
		else
		{
			(my $body = $l) =~ s/^\Q$open->{indent}\E//;
			push @{ $open->{body} }, $body;
		}
		next;
	}

	if ($l =~ /^(\s*)```\s*(\S*)/)
	{
		$open = { indent => $1, lang => lc $2, line => $n, body => [] };
		if ($open->{lang} eq 'sql')
		{
			$open->{skip} = $skip->[0] if $skip;
			push @sql, $open;
		}
		elsif ($open->{lang} eq 'text')
		{
			if ($after_sql)
			{
				$after_sql->{output} = $open;
			}
			else
			{
				push @problems,
				  "line $n: a ```text block must directly follow a ```sql block"
				  . " (it is that block's output); use ``` for other text";
			}
		}
		push @problems, "line $skip->[1]: the skip comment is not followed by a ```sql block"
		  if $skip && $open->{lang} ne 'sql';
		$skip = undef;
		$after_sql = undef;
		next;
	}

	if ($l =~ /^\s*<!--\s*readme-test:\s*(.*?)\s*-->\s*$/)
	{
		my $what = $1;
		if ($what =~ /^skip:\s*(\S.*)$/)
		{
			$skip = [ $1, $n ];
		}
		else
		{
			push @problems,
			  "line $n: unknown or incomplete readme-test comment \"$what\""
			  . " (known: \"readme-test: skip: <why>\")";
		}
		next;
	}
	if ($l =~ /^\s*<!--.*readme-test/)
	{
		push @problems, "line $n: a readme-test comment must be one line <!-- ... -->";
	}

	if ($l =~ /\S/)
	{
		push @problems, "line $skip->[1]: the skip comment is not followed by a ```sql block"
		  if $skip;
		$skip = undef;
		$after_sql = undef;
	}
}
push @problems, "line $open->{line}: the block is never closed" if $open;

is(join("\n", @problems), '', 'README.md follows the readme-test conventions');
cmp_ok(scalar @sql, '>=', 10, 'README.md has its ```sql blocks');

my @run = grep { !defined $_->{skip} } @sql;
note("skipped: README.md line $_->{line}: $_->{skip}")
  for grep { defined $_->{skip} } @sql;

# Each block must end its last statement: a statement left open would run
# on into the next block and be reported there.
for my $b (@run)
{
	my @code = grep { /\S/ && !/^\s*--/ } @{ $b->{body} };
	my $last = @code ? $code[-1] : '';
	$last =~ s/\s+--.*$//;
	ok( $last =~ /;\s*$/ || $last =~ /\\\w+(\s+\S+)*\s*$/,
		"README.md line $b->{line}: the block ends its last statement")
	  or diag("last line: $last");
}

# --- one psql session --------------------------------------------------------

my $node = PostgreSQL::Test::Cluster->new('readme');
$node->init;
$node->start;
$node->safe_psql('postgres', 'CREATE DATABASE readme');

my $dir = PostgreSQL::Test::Utils::tempdir;
my $script = "$dir/readme.sql";
my @map;    # [script line of the block's first line, block]
{
	open my $out, '>', $script or die "cannot write $script: $!";
	my $line = 0;
	for my $b (@run)
	{
		print $out "\\echo '\@\@readme-test block $b->{line}\@\@'\n";
		$line++;
		push @map, [ $line + 1, $b ];
		print $out "$_\n" for @{ $b->{body} };
		$line += @{ $b->{body} };
	}
	print $out "\\echo '\@\@readme-test end\@\@'\n";
	close $out;
}

# README line of a line of the script
sub readme_line
{
	my $s = shift;
	my $at;
	for my $m (@map)
	{
		$at = $m if $m->[0] <= $s;
	}
	return undef unless $at;
	return $at->[1]{line} + 1 + $s - $at->[0];
}

my ($stdout, $stderr) = ('', '');
{
	local $ENV{PGTZ} = 'UTC';
	local $ENV{PGDATESTYLE} = 'ISO, MDY';
	IPC::Run::run(
		[
			'psql', '-X', '-v', 'ON_ERROR_STOP=1',
			'-d', $node->connstr('readme'), '-f', $script
		],
		'<', \undef, '>', \$stdout, '2>', \$stderr);
}
my $psql_rc = $? >> 8;

# what psql printed per block, by README line
my %printed;
my $current;
my $ended = 0;
for my $l (split /\n/, $stdout, -1)
{
	if ($l =~ /^\@\@readme-test block (\d+)\@\@$/)
	{
		$current = $1;
		$printed{$current} = [];
	}
	elsif ($l eq '@@readme-test end@@')
	{
		$ended = 1;
		$current = undef;
	}
	elsif (defined $current)
	{
		push @{ $printed{$current} }, $l;
	}
}

# messages on stderr, by the README line of the block they came from
# (a message's DETAIL, HINT and LINE lines come without the prefix)
my %messages;
my @unplaced;
my $last_block;
for my $l (split /\n/, $stderr)
{
	if ($l =~ /^psql:[^:]*:(\d+): (.*)$/)
	{
		my ($s, $text) = ($1, $2);
		$last_block = undef;
		for my $m (@map)
		{
			$last_block = $m->[1]{line} if $m->[0] <= $s;
		}
		if (defined $last_block)
		{
			push @{ $messages{$last_block} },
			  "README.md line " . readme_line($s) . ": $text";
			next;
		}
	}
	elsif (defined $last_block)
	{
		push @{ $messages{$last_block} }, $l;
		next;
	}
	push @unplaced, $l;
}
is(join("\n", @unplaced), '', 'psql printed no messages outside the blocks');

sub normalize
{
	my @l = map { (my $x = $_) =~ s/\s+$//; $x } @_;
	shift @l while @l && $l[0] eq '';
	pop @l while @l && $l[-1] eq '';
	return join("\n", @l) . "\n";
}

sub show_diff
{
	my ($b, $want, $got) = @_;
	my ($w, $g) = ("$dir/want", "$dir/got");
	for ([ $w, $want ], [ $g, $got ])
	{
		open my $f, '>', $_->[0] or die;
		print $f $_->[1];
		close $f;
	}
	my $d = '';
	IPC::Run::run(
		[
			'diff', '-u',
			'--label', "README.md line $b->{output}{line} (the README's output block)",
			'--label', "what psql printed for the sql block at line $b->{line}",
			$w, $g
		],
		'>', \$d);
	return $d;
}

my $failed_at;
for my $b (@run)
{
	my $name = "README.md line $b->{line}";
	if ($failed_at)
	{
		SKIP:
		{
			skip("not run: the block at README.md line $failed_at failed", 1);
		}
		next;
	}

	my @msg = @{ $messages{ $b->{line} } // [] };
	my @bad = grep { /: (ERROR|FATAL|PANIC|WARNING):/ } @msg;
	# psql stopped in this block: the last block that printed its marker
	my $stopped = $psql_rc != 0 && exists $printed{ $b->{line} }
	  && !grep { $_->{line} > $b->{line} && exists $printed{ $_->{line} } } @run;
	if (!exists $printed{ $b->{line} })
	{
		$stopped = 1;
		push @bad, "psql stopped before this block (exit status $psql_rc)";
		push @bad, $stderr if !@msg && $stderr ne '';
	}
	if (@bad || $stopped)
	{
		push @bad, "psql exited with status $psql_rc in this block" unless @bad;
		fail("$name: the sql block runs");
		diag("$name: the sql block failed:\n" . join("\n", @msg ? @msg : @bad));
		$failed_at = $b->{line};
		next;
	}
	pass("$name: the sql block runs");
	note(join("\n", @msg)) if @msg;

	if ($b->{output})
	{
		my $want = normalize(@{ $b->{output}{body} });
		my $got = normalize(@{ $printed{ $b->{line} } });
		ok($want eq $got,
			"README.md line $b->{output}{line}: the output of the sql block at line $b->{line}"
		) or diag(show_diff($b, $want, $got));
	}
}
ok($failed_at || ($ended && $psql_rc == 0), 'psql ran every block to the end')
  or diag("psql exit status $psql_rc\n$stderr");

$node->stop;
done_testing();
