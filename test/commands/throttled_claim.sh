#!/bin/bash
# test/commands/throttled_claim.sh: bench/README's psql script, the
# documented line verbatim, in a throwaway cluster.
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/cluster.sh"
cd "$HERE/../.."

createdb scratch && psql -X -d scratch -f bench/throttled_claim.sql
