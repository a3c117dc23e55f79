#!/usr/bin/env bash
# The README's C++ blocks: checks that each matches its compiled file
# (check_snippets.py), then runs the programs built from them:
#   readme_quickstart       twice in a fresh folder on the embedded engine; the
#                           second run must resume from the first's bookmark,
#                           and the stored state must be the one Meltano
#                           writes (read back with BUILD_DIR/tools/chstate)
#   readme_values           "Exact values" and the GCC 12 note, checked
#   readme_simulated_time   the settle snippet, checked
#   readme_simulated_job    the "testing your own code" program (its own checks)
#   readme_separate         "Compiling chstate once": its own src.hpp, checked
#   scripts/run-example.sh  the README's first command: --help, then twice
#   readme_http             against the test server in $CHSTATE_TEST_SERVER_DIR
#                           (scripts/clickhouse-server.sh); fails without one
# Prints each program's output, then
#   readme-programs: ran=N failed=N
# and exits non-zero when the check or any program fails.
# Usage: tests/readme/run.sh BUILD_DIR    (e.g. build)
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bin=$(cd "${1:?usage: run.sh BUILD_DIR}" && pwd)/tests/readme
status=0

python3 "$repo/tests/readme/check_snippets.py" --root "$repo" || status=1

work=$(mktemp -d /tmp/chstate-readme.XXXXXX)
trap 'rm -rf "$work"' EXIT
ran=0 failed=0
fail() { echo "readme: FAILED: $*" >&2; failed=$((failed + 1)); }

# Quickstart: the snippet's data folder is relative, so run it in $work.
ran=$((ran + 1))
first=$(cd "$work" && "$bin/readme_quickstart" 2>&1) || fail "readme_quickstart (first run): $first"
second=$(cd "$work" && "$bin/readme_quickstart" 2>&1) || fail "readme_quickstart (second run): $second"
if [[ $first == "copy_users_after 0" && $second == "copy_users_after 10" ]]; then
  echo "readme quickstart: ok (first run from 0, second resumed from bookmark 10)"
else
  fail "readme_quickstart: expected 'copy_users_after 0' then 'copy_users_after 10', got '$first' then '$second'"
fi
# What it stored is Meltano's shape (`meltano state get` prints the same):
# the bookmark under singer_state, compared by Python's json module.
ran=$((ran + 1))
tool=$(cd "$1" && pwd)/tools/chstate
if [[ ! -x $tool ]]; then
  fail "$tool is not built (scripts/test.sh builds it): the quickstart's stored state cannot be read back"
elif stored=$("$tool" --uri "chdb:$work/my-pipeline-state" state get dev:tap-github-to-target-ch 2>&1) &&
     python3 -c 'import json, sys; sys.exit(json.loads(sys.argv[1]) != {"singer_state": {"bookmarks": {"users": 20}}})' \
       "$stored"; then
  echo "readme quickstart: ok (stored $stored, Meltano's shape)"
else
  fail "readme_quickstart: stored '$stored', expected {\"singer_state\": {\"bookmarks\": {\"users\": 20}}}"
fi

# The README's first command, as a new user runs it: --help, then twice in a
# folder of its own (the second run resumes from the first's bookmark).
ran=$((ran + 1))
example_help=$(bash "$repo/scripts/run-example.sh" --help 2>&1) || fail "run-example.sh --help: $example_help"
ex1=$(bash "$repo/scripts/run-example.sh" --batches 1 "chdb:$work/example-state" 2>&1) || fail "run-example.sh: $ex1"
ex2=$(bash "$repo/scripts/run-example.sh" --batches 1 "chdb:$work/example-state" 2>&1) || fail "run-example.sh (again): $ex2"
if grep -q -- '--batches N' <<<"$example_help" && grep -q 'run-example: compiling\|run-example: running it' <<<"$ex1" &&
   grep -q 'copied orders 1\.\.10' <<<"$ex1" && grep -q 'resuming from bookmark: orders.last_id = 10' <<<"$ex2"; then
  echo "readme run-example: ok (--help; first run copied 1..10, second resumed from 10)"
else
  fail "run-example.sh: unexpected output: help '${example_help:0:300}' first '${ex1:0:600}' second '${ex2:0:600}'"
fi

for program in readme_values readme_simulated_time readme_simulated_job readme_separate; do
  ran=$((ran + 1))
  [[ $program != readme_simulated_job ]] || echo "readme simulated-job (the README's program):"
  "$bin/$program" || fail "$program exited with status $?"
done

# HTTP: the snippet reads its settings from the environment, as shown.
ran=$((ran + 1))
if [[ -n ${CHSTATE_TEST_SERVER_DIR:-} && -s $CHSTATE_TEST_SERVER_DIR/env ]]; then
  (
    # shellcheck disable=SC1091
    source "$CHSTATE_TEST_SERVER_DIR/env"
    unset MELTANO_STATE_BACKEND_URI
    export MELTANO_STATE_BACKEND_CLICKHOUSE_HOST=$CHSTATE_TEST_HTTP_HOST
    export MELTANO_STATE_BACKEND_CLICKHOUSE_PORT=$CHSTATE_TEST_HTTP_PORT
    export MELTANO_STATE_BACKEND_CLICKHOUSE_USER=$CHSTATE_TEST_HTTP_USER
    MELTANO_STATE_BACKEND_CLICKHOUSE_PASSWORD=$(cat "$CHSTATE_TEST_HTTP_PASSWORD_FILE")
    export MELTANO_STATE_BACKEND_CLICKHOUSE_PASSWORD
    export MELTANO_STATE_BACKEND_CLICKHOUSE_DATABASE=default
    export MELTANO_STATE_BACKEND_CLICKHOUSE_SCHEMA=chstate_readme
    export MELTANO_STATE_BACKEND_CLICKHOUSE_TABLE=state
    exec "$bin/readme_http"
  ) || fail "readme_http exited with status $?"
else
  fail "readme_http: no test server (CHSTATE_TEST_SERVER_DIR with an env file; see scripts/clickhouse-server.sh)"
fi

echo "readme-programs: ran=$ran failed=$failed"
((failed == 0)) || status=1
exit "$status"
