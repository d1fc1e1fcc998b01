#!/bin/bash
# test/commands/dump_restore.sh: the README's dump and restore, its three
# lines verbatim, on a database with jobs in every state; the restored
# database must hold the same jobs, history and operations, and a token
# issued before the dump must still be accepted after it.
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/cluster.sh"

createdb app
psql -X -q -v ON_ERROR_STOP=1 -d app <<'SQL'
CREATE EXTENSION job_state;
SELECT job_state.create_queue('emails', lease => '2 min');
SELECT job_state.submit('emails', jsonb_build_object('n', i), 'k' || i) FROM generate_series(1, 6) i;
SELECT job_state.succeed((SELECT token FROM job_state.claim('emails', 'w')), '{"ok": true}');
SELECT job_state.fail((SELECT token FROM job_state.claim('emails', 'w')), 'permanent', '{"e": 1}');
SELECT job_state.cancel(id) FROM job_state.job WHERE idempotency_key = 'k6';
CREATE TABLE held AS SELECT token FROM job_state.claim('emails', 'w');
SQL

pg_dump -Fc app > app.dump
createdb app_restored
PGOPTIONS='-c job_state.restore=on' pg_restore -d app_restored app.dump

summary="SELECT string_agg(id || ':' || status || ':' || generation, ' ' ORDER BY id) FROM job_state.job"
before=$(psql -X -At -d app -c "$summary")
after=$(psql -X -At -d app_restored -c "$summary")
echo "before: $before"
echo "after:  $after"
[ "$before" = "$after" ] || { echo "dump_restore: the restored jobs differ"; exit 1; }
case "$before" in *running*) ;; *) echo "dump_restore: no running job to check"; exit 1 ;; esac
psql -X -q -v ON_ERROR_STOP=1 -d app_restored \
	-c "SELECT job_state.succeed((SELECT token FROM held), '{}')" >/dev/null
echo "dump_restore: the restored database has the same jobs, and the held token still succeeds its job"
