# test/commands/cluster.sh: sourced by the scripts of test/commands.  As
# root it runs the calling script again as user postgres; then it makes a
# throwaway cluster (initdb, pg_ctl) in a temporary directory, Unix socket
# only, exports PGHOST, PGPORT and PGUSER for it, moves into that directory,
# and stops and removes it when the script exits.  PG_MAJOR picks the
# server (default 15).
if [ "$(id -u)" = 0 ]; then
	exec su postgres -s /bin/bash -c "$(printf '%q ' "$0" "$@")"
fi
set -euo pipefail
PG_BIN=/usr/lib/postgresql/${PG_MAJOR:-15}/bin
CLUSTER_DIR=$(mktemp -d -t job_state-commands.XXXXXX)
cluster_stop() {
	"$PG_BIN/pg_ctl" -D "$CLUSTER_DIR/data" -m immediate stop >/dev/null 2>&1 || true
	rm -rf "$CLUSTER_DIR"
}
trap cluster_stop EXIT
"$PG_BIN/initdb" -D "$CLUSTER_DIR/data" -U postgres -A trust -E UTF8 \
	--locale=C.UTF-8 --no-sync >"$CLUSTER_DIR/initdb.log" 2>&1 ||
	{ cat "$CLUSTER_DIR/initdb.log"; exit 1; }
CLUSTER_PORT=$((20000 + $$ % 10000))
"$PG_BIN/pg_ctl" -D "$CLUSTER_DIR/data" -w -l "$CLUSTER_DIR/server.log" \
	-o "-p $CLUSTER_PORT -k $CLUSTER_DIR -c listen_addresses= -c job_state.check_statement_names=on" \
	start >/dev/null || { cat "$CLUSTER_DIR/server.log"; exit 1; }
export PGHOST=$CLUSTER_DIR PGPORT=$CLUSTER_PORT PGUSER=postgres PGDATABASE=postgres
export PATH=$PG_BIN:$PATH
cd "$CLUSTER_DIR"
