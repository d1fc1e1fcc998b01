# The background workers run as the bootstrap superuser in a database whose
# owner need not be one.  The owner controls the database's settings: a
# search_path with a schema of the owner's ahead of pg_catalog once made
# the workers run the owner's "=" operator as superuser every round (the
# owner was made SUPERUSER after the next restart).  Workers pin their
# search_path and name the schema of everything they call: nothing of the
# owner's may run, whatever ALTER DATABASE ... SET says.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('worker_search_path');
$node->init;
$node->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'job_state'
job_state.database = 'owned'
job_state.sweep_interval = 200
});
$node->start;

$node->safe_psql('postgres', q{
CREATE ROLE regress_db_owner LOGIN;
CREATE DATABASE owned OWNER regress_db_owner;
});
$node->safe_psql('owned', 'CREATE EXTENSION job_state');
$node->safe_psql('owned', "SELECT job_state.create_queue('q')");

# The owner's trap: "=" for the types the workers' statements compare, each
# recording who ran it and trying to make the owner a superuser.
$node->safe_psql(
	'owned', q{
SET ROLE regress_db_owner;
CREATE SCHEMA evil;
CREATE TABLE evil.ran (who text, at timestamptz DEFAULT now());
GRANT INSERT ON evil.ran TO PUBLIC;
CREATE FUNCTION evil.trap() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO evil.ran (who)
		VALUES (pg_catalog.current_setting('application_name'));
	BEGIN
		ALTER ROLE regress_db_owner SUPERUSER;
	EXCEPTION WHEN OTHERS THEN NULL;
	END;
END $$;
CREATE FUNCTION evil.eq_name(name, name) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM evil.trap(); RETURN $1 OPERATOR(pg_catalog.=) $2; END $$;
CREATE FUNCTION evil.eq_text(text, text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM evil.trap(); RETURN $1 OPERATOR(pg_catalog.=) $2; END $$;
CREATE FUNCTION evil.eq_int8(int8, int8) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM evil.trap(); RETURN $1 OPERATOR(pg_catalog.=) $2; END $$;
CREATE FUNCTION evil.eq_int4(int4, int4) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN PERFORM evil.trap(); RETURN $1 OPERATOR(pg_catalog.=) $2; END $$;
CREATE OPERATOR evil.= (LEFTARG = name, RIGHTARG = name, FUNCTION = evil.eq_name);
CREATE OPERATOR evil.= (LEFTARG = text, RIGHTARG = text, FUNCTION = evil.eq_text);
CREATE OPERATOR evil.= (LEFTARG = int8, RIGHTARG = int8, FUNCTION = evil.eq_int8);
CREATE OPERATOR evil.= (LEFTARG = int4, RIGHTARG = int4, FUNCTION = evil.eq_int4);
ALTER DATABASE owned SET search_path = evil, pg_catalog, public;
});

# the trap works: a session of the database's own settings runs it
$node->safe_psql('owned', "SELECT 'a'::name = 'b'::name");
is($node->safe_psql('owned', 'SELECT count(*) FROM evil.ran'),
	'1', 'the planted operator is found through the database search_path');
$node->safe_psql('owned', q{
TRUNCATE evil.ran;
ALTER ROLE regress_db_owner NOSUPERUSER;
});

# the workers connect again and so take up the database's settings
$node->restart;

# The workers did rounds: a lease expired with nobody calling sweep().
# This session pins its own search_path: the job triggers run under the
# caller's, and only the workers' statements are on trial here.
my $pinned = 'SET search_path = pg_catalog, public;';
my $id = $node->safe_psql('owned',
	"$pinned SELECT job_id FROM job_state.submit('q', '{}')");
$node->safe_psql('owned',
	"$pinned SELECT job_id FROM job_state.claim('q', 'w', lease => '1 second')");
ok( $node->poll_query_until(
		'owned',
		"SELECT status OPERATOR(pg_catalog.=) 'unknown' FROM job_state.job"
		  . " WHERE id OPERATOR(pg_catalog.=) $id"),
	'the sweeper expired the lease');
ok( $node->poll_query_until(
		'owned', q{
SELECT pg_catalog.count(*) OPERATOR(pg_catalog.=) 2 FROM pg_catalog.pg_stat_activity
 WHERE backend_type OPERATOR(pg_catalog.=)
       ANY (ARRAY['job_state sweeper', 'job_state notifier'])}),
	'both workers are connected');
# a few more rounds of each
sleep(2);

is( $node->safe_psql(
		'owned',
		'SELECT pg_catalog.string_agg(DISTINCT who, \', \') FROM evil.ran'),
	'', 'no worker ran an operator of the owner\'s schema');
is( $node->safe_psql(
		'postgres',
		"SELECT rolsuper FROM pg_roles WHERE rolname = 'regress_db_owner'"),
	'f',
	'the database owner is not a superuser');
is( $node->safe_psql(
		'postgres', q{
SELECT setting FROM pg_settings WHERE name = 'search_path'}),
	'"$user", public', 'other databases keep their own search_path');

$node->stop;
done_testing();
