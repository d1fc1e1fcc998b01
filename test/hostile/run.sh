#!/bin/bash
# test/hostile/run.sh PG_CONFIG SUITE DATABASE MAKE-ARGS...
#
# One suite of tools/test's hardened pass, as postgres inside
# pg_virtualenv: makes DATABASE itself (pg_regress then uses it as it is,
# --use-existing) with the settings pg_regress gives its own databases,
# the hostile schema of schema.sql and job_state, and a search_path that
# puts the hostile schema ahead of pg_catalog; then runs make installcheck
# with MAKE-ARGS.  Writes SUITE.log and SUITE.rc in the current directory.
set -u
pg_config=$1
suite=$2
db=$3
shift 3

echo "== $suite"
if ! {
	psql -X -q -v ON_ERROR_STOP=1 -d postgres \
		-c "DROP DATABASE IF EXISTS $db" \
		-c "CREATE DATABASE $db TEMPLATE template0" &&
	psql -X -q -v ON_ERROR_STOP=1 -d "$db" \
		-f test/hostile/schema.sql \
		-c 'CREATE EXTENSION job_state' \
		-c "ALTER DATABASE $db SET lc_messages TO 'C'" \
		-c "ALTER DATABASE $db SET lc_monetary TO 'C'" \
		-c "ALTER DATABASE $db SET lc_numeric TO 'C'" \
		-c "ALTER DATABASE $db SET lc_time TO 'C'" \
		-c "ALTER DATABASE $db SET bytea_output TO 'hex'" \
		-c "ALTER DATABASE $db SET timezone_abbreviations TO 'Default'" \
		-c "ALTER DATABASE $db SET search_path = hostile, pg_catalog, public"
} >"$suite.log" 2>&1; then
	echo 1 >"$suite.rc"
	cat "$suite.log"
	exit 0
fi
make --no-print-directory PG_CONFIG="$pg_config" installcheck "$@" \
	EXTRA_REGRESS_OPTS=--use-existing >>"$suite.log" 2>&1
echo $? >"$suite.rc"
cat "$suite.log"
