#!/bin/bash
# test/commands/self_test.sh: tools/check-commands fails where it must, on a
# small tree of its own (JS_COMMANDS_ROOT): a documented command without an
# entry, an entry no document names, a script that does not hold its
# command verbatim, a command that fails, a missing expected line; and
# passes on the same tree mended.  Run by tools/test before the commands
# suite proper.
set -euo pipefail
CHECK=$(cd "$(dirname "$0")/../.." && pwd)/tools/check-commands
T=$(mktemp -d -t job_state-commands-self.XXXXXX)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/test/commands"
fails=0
expect() {		# expect PASS|FAIL TEXT ARGS...: the verdict, and TEXT in the output
	local want=$1 text=$2 out rc=0
	shift 2
	out=$(JS_COMMANDS_ROOT=$T "$CHECK" "$@" 2>&1) || rc=$?
	if { [ "$want" = PASS ] && [ $rc != 0 ]; } || { [ "$want" = FAIL ] && [ $rc = 0 ]; } ||
		! grep -qF -- "$text" <<<"$out"; then
		echo "self_test: expected $want with \"$text\"; got exit $rc:"
		echo "$out"
		fails=$((fails + 1))
	fi
}
printf '# t\n\n```sh\necho documented   # a comment\ntrue && \\\n  echo joined\n```\n' >"$T/README.md"
printf 'echo documented\n\trun\n' >"$T/test/commands.txt"
expect FAIL "'true && echo joined' has no entry" --skip-run
printf 'echo documented\n\trun\ntrue && echo joined\n\tscript: test/commands/s.sh\ngone\n\trun\n' >"$T/test/commands.txt"
printf '#!/bin/bash\ntrue && echo joined\n' >"$T/test/commands/s.sh"
chmod +x "$T/test/commands/s.sh"
expect FAIL "'gone' is documented nowhere" --skip-run
printf '#!/bin/bash\necho other\n' >"$T/test/commands/s.sh"
printf 'echo documented\n\trun\ntrue && echo joined\n\tscript: test/commands/s.sh\n' >"$T/test/commands.txt"
expect FAIL "does not run 'true && echo joined' verbatim" --skip-run
printf '#!/bin/bash\ntrue && echo joined\n' >"$T/test/commands/s.sh"
expect PASS "2 documented commands, each with an entry" --skip-run
if [ "$(id -u)" = 0 ]; then
	printf 'echo documented\n\trun: false\ntrue && echo joined\n\tscript: test/commands/s.sh\n' >"$T/test/commands.txt"
	expect FAIL "1 of 2 failed" 
	printf 'echo documented\n\trun\n\texpect: not printed\ntrue && echo joined\n\tscript: test/commands/s.sh\n\texpect: joined\n' >"$T/test/commands.txt"
	expect FAIL "no line with 'not printed'"
	printf 'echo documented\n\trun\n\texpect: documented\ntrue && echo joined\n\tscript: test/commands/s.sh\n\texpect: joined\n' >"$T/test/commands.txt"
	expect PASS "2 run, 0 checked"
fi
if [ $fails != 0 ]; then
	echo "self_test: FAIL - $fails case(s)"
	exit 1
fi
echo "self_test: PASS"
