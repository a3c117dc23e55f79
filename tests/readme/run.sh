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
# and the pages' other blocks this script names by id (check_snippets.py
# requires each to be named by a script that checks it; docblocks.py finds
# them on the pages at run time):
#   readme-commands         the README's two commands: the first is what runs
#                           below, the second what .ci/run execs (this run)
#   readme-example-output   the README's sample output against two runs of
#                           its first command (state in a fresh folder, shown
#                           as .cache/example-state; `...` any lines)
#   cli-synopsis            docs/cli.md's synopsis: each subcommand's --help
#                           lists every flag shown
#   cli-export              docs/cli.md's export line against a real export
#   cli-environment         docs/cli.md's environment lines, run against the
#                           test server (host, port, user and password its own)
#   cluster-uri             docs/cluster.md's URI: accepted, all three hosts tried
#   lock-schedules-seed, lock-schedules-strict   docs/lock.md's explorer lines
#                           against the test log, $CHSTATE_TEST_DIR/output.log
#                           (scripts/test.sh); fails without one
#   sql                     every ```sql block against docs_sql's text
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

# ---- The pages' other blocks, by id (tests/readme/docblocks.py) --------------
docblock() { python3 "$repo/tests/readme/docblocks.py" "$@"; }

# readme-commands: the README's two commands are the ones this run runs.
ran=$((ran + 1))
mapfile -t readme_commands < <(docblock commands readme-commands)
if [[ ${readme_commands[*]:-} == "bash scripts/run-example.sh bash scripts/test.sh" ]] &&
   grep -qx 'exec bash scripts/test.sh' "$repo/.ci/run"; then
  echo "docblock readme-commands: ok (the first runs below; .ci/run execs the second, which runs this)"
else
  fail "README block readme-commands: '${readme_commands[*]:-}' (want 'bash scripts/run-example.sh' and 'bash scripts/test.sh', the latter exec'd by .ci/run)"
fi

# readme-example-output: the first command, as written, twice, its state in a
# fresh folder (MELTANO_STATE_BACKEND_URI; printed back as the default
# .cache/example-state), its standard output after a `$ ` line each (its
# `run-example: …` progress goes to standard error, as the README says).
ran=$((ran + 1))
{
  for _ in 1 2; do
    echo "\$ ${readme_commands[0]:-}"
    (cd "$repo" && MELTANO_STATE_BACKEND_URI=chdb:$work/example-default ${readme_commands[0]:-false} 2>>"$work/example-stderr.txt") ||
      echo "(exit status $?)"
  done
} | sed "s|chdb:$work/example-default|chdb:.cache/example-state|" >"$work/example-output.txt"
docblock output readme-example-output "$work/example-output.txt" ||
  fail "README block readme-example-output (its standard error: $(tail -n 20 "$work/example-stderr.txt"))"

# cli-synopsis: every subcommand and flag shown is in that subcommand's --help.
ran=$((ran + 1))
docblock help cli-synopsis "$tool" || fail "docs/cli.md block cli-synopsis"

# cli-export: the page's line is what `state export` prints for its state
# (the page's `...` stands for more states: a second one is stored).
ran=$((ran + 1))
export_uri="chdb:$work/export-state"
if "$tool" -q --uri "$export_uri" state set dev:a-to-b '{"singer_state":{"bookmarks":{"n":18446744073709551616}}}' --force &&
   "$tool" -q --uri "$export_uri" state set dev:z-second '{"singer_state":{}}' --force &&
   "$tool" --uri "$export_uri" state export >"$work/export.json"; then
  docblock output cli-export "$work/export.json" || fail "docs/cli.md block cli-export"
else
  fail "docs/cli.md block cli-export: the tool failed to store or export"
fi

# cluster-uri: the URI is accepted (not a usage error, exit 2) and the store
# tries each of its three hosts.
ran=$((ran + 1))
cluster_uri=$(docblock block cluster-uri)
cluster_out=$(timeout 120 "$tool" --uri "$cluster_uri" state list 2>&1)
cluster_rc=$?
if ((cluster_rc != 0 && cluster_rc != 2)) && [[ $cluster_out == *ch1* && $cluster_out == *ch2* && $cluster_out == *ch3* ]]; then
  echo "docblock cluster-uri: ok (accepted; exit $cluster_rc: ${cluster_out:0:120}…)"
else
  fail "docs/cluster.md block cluster-uri: exit $cluster_rc: $cluster_out"
fi

# lock-schedules-*: the explorer's lines as the test run printed them.
for id in lock-schedules-seed lock-schedules-strict; do
  ran=$((ran + 1))
  if [[ -n ${CHSTATE_TEST_DIR:-} && -s $CHSTATE_TEST_DIR/output.log ]]; then
    docblock schedules "$id" "$CHSTATE_TEST_DIR/output.log" || fail "docs/lock.md block $id"
  else
    fail "docs/lock.md block $id: no test log (\$CHSTATE_TEST_DIR/output.log, which scripts/test.sh writes)"
  fi
done

# sql: the SQL the library generates (docs_sql, statements.hpp) for each page's block.
ran=$((ran + 1))
"$bin/readme_docs_sql" >"$work/docs_sql.txt" && docblock sql <"$work/docs_sql.txt" || fail "the pages' SQL blocks"

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
  # cli-environment: docs/cli.md's lines run as written, the URI's user, host
  # and port and the password the test server's, `chstate` the built tool.
  ran=$((ran + 1))
  (
    # shellcheck disable=SC1091
    source "$CHSTATE_TEST_SERVER_DIR/env"
    password=$(cat "$CHSTATE_TEST_HTTP_PASSWORD_FILE")
    script=$(docblock block cli-environment)
    [[ $script == *"etl@ch.internal:8123"* && $script == *"PASSWORD=…"* ]] || { echo "unexpected block: $script" >&2; exit 1; }
    script=${script//etl@ch.internal:8123/$CHSTATE_TEST_HTTP_USER@$CHSTATE_TEST_HTTP_HOST:$CHSTATE_TEST_HTTP_PORT}
    script=${script//PASSWORD=…/PASSWORD=\"\$password\"}
    script=${script//chstate state/\"\$tool\" state}
    unset MELTANO_STATE_BACKEND_URI
    export password tool
    bash -euo pipefail -c "$script" >"$work/env-list.txt"
  ) && echo "docblock cli-environment: ok (state list against the test server: $(wc -l <"$work/env-list.txt") ids)" ||
    fail "docs/cli.md block cli-environment against the test server"
else
  fail "readme_http: no test server (CHSTATE_TEST_SERVER_DIR with an env file; see scripts/clickhouse-server.sh)"
fi

echo "readme-programs: ran=$ran failed=$failed"
((failed == 0)) || status=1
exit "$status"
