# The row writer's guard against a server whose executor structs are bigger
# than the headers job_state was built with (src/rowwrite.c, JS_STRUCT_ROOM
# in src/job_state.h).  A minor release may add fields at the end of such a
# struct, as 17.1 did to ResultRelInfo; the structs job_state allocates
# itself have room for that, and the EPQState a canary past the room.
#
# This test builds job_state with -DJS_STRUCT_ROOM=-8: room short of our own
# headers, which is what a server whose EPQState outgrew the room looks like.
# It installs that build into a relocated copy of this server's installation
# (never into the server's own directories) and checks that a submit fails
# with the canary's error instead of writing past the allocation, and that
# the server goes on serving.  Without the canary check the submit succeeds
# and the test fails.
use strict;
use warnings;

use File::Basename;
use File::Copy;
use File::Path qw(make_path);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $pg_config = $ENV{PG_CONFIG} // 'pg_config';
my %dir;
for my $what (qw(bindir pkglibdir sharedir))
{
	chomp($dir{$what} = `$pg_config --$what`);
	die "$pg_config --$what failed" if $? != 0;
}
plan skip_all => "the server's bindir $dir{bindir} is not named bin"
  unless basename($dir{bindir}) eq 'bin';

my $tmp   = PostgreSQL::Test::Utils::tempdir;
my $build = "$tmp/build";
my $root  = "$tmp/root";

# the build, from the tree this test runs in
make_path($build);
system_or_bail('cp', '-R', 'src', 'sql', 'Makefile', 'job_state.control',
	$build);
my @make = ('make', '-C', $build, '-s', "PG_CONFIG=$pg_config", 'with_llvm=no');
system_or_bail(@make, 'clean');
system_or_bail(@make, '-j4', 'PG_CPPFLAGS=-DJS_STRUCT_ROOM=-8');
system_or_bail(@make, 'install', "DESTDIR=$root");

# the rest of the installation: programs copied (a server finds its
# libraries and shared files relative to its own executable), everything
# else linked, our build's files kept
make_path("$root$dir{bindir}");
opendir(my $bin, $dir{bindir}) or die "cannot read $dir{bindir}: $!";
for my $f (grep { -f "$dir{bindir}/$_" } readdir($bin))
{
	copy("$dir{bindir}/$f", "$root$dir{bindir}/$f")
	  or die "cannot copy $f: $!";
	chmod(0755, "$root$dir{bindir}/$f");
}
closedir($bin);

sub link_missing
{
	my ($from, $to) = @_;

	make_path($to);
	opendir(my $d, $from) or die "cannot read $from: $!";
	for my $f (grep { !/^\.\.?$/ } readdir($d))
	{
		next if -e "$to/$f" || -l "$to/$f";
		symlink("$from/$f", "$to/$f") or die "cannot link $f: $!";
	}
	closedir($d);
	return;
}
link_missing("$dir{sharedir}/extension", "$root$dir{sharedir}/extension");
link_missing($dir{sharedir},             "$root$dir{sharedir}");
link_missing($dir{pkglibdir},            "$root$dir{pkglibdir}");

my $relocated = `$root$dir{bindir}/pg_config --pkglibdir`;
chomp $relocated;
plan skip_all => 'this installation is not relocatable'
  unless $relocated eq "$root$dir{pkglibdir}";

ok(-f "$root$dir{pkglibdir}/job_state.so" && !-l "$root$dir{pkglibdir}/job_state.so",
	'the test build is in the relocated installation');

my $node = PostgreSQL::Test::Cluster->new('struct_room',
	install_path => dirname("$root$dir{bindir}"));
$node->init;
$node->start;

is( $node->safe_psql(
		'postgres', q{SELECT setting FROM pg_config WHERE name = 'PKGLIBDIR'}),
	"$root$dir{pkglibdir}",
	'the node runs from the relocated installation');

$node->safe_psql('postgres', 'CREATE EXTENSION job_state');
$node->safe_psql('postgres', q{SELECT job_state.create_queue('room')});

my ($ret, $stdout, $stderr) = $node->psql('postgres',
	q{SELECT job_id FROM job_state.submit('room', '{}')});
isnt($ret, 0, 'a submit through the row writer fails');
like(
	$stderr,
	qr/this server's EPQState is bigger than job_state was built for/,
	'the canary reports the struct that outgrew the room');
like($stderr, qr/Rebuild job_state against the headers/,
	'the hint says to rebuild');

is($node->safe_psql('postgres', 'SELECT count(*) FROM job_state.job'),
	'0', 'nothing was written');
is($node->safe_psql('postgres', 'SELECT 1'),
	'1', 'the backend raised an error and the server serves on');

$node->stop;
my $log = slurp_file($node->logfile);
unlike($log, qr/terminated by signal/, 'no backend crashed');

done_testing();
