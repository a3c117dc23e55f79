#!/usr/bin/env bash
# The README's second command, and what CI runs: installs what is missing,
# fetches chDB, starts a private ClickHouse server, builds everything and runs
# every test. Ends with doctest's summary; exits non-zero on any failure.
# Usage: scripts/test.sh [doctest options...]
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

# Each stage's wall time, printed as one `timing: …` line at the end (CI's
# budget is read from it: where a slow run went).
timings=()
stage_start=$SECONDS
stage_done() { timings+=("$1=$((SECONDS - stage_start))s"); stage_start=$SECONDS; }

bash scripts/build.sh
stage_done build

server_dir=$(mktemp -d /tmp/chstate-server.XXXXXX)
stop_server() { bash scripts/clickhouse-server.sh stop "$server_dir" >/dev/null 2>&1 || true; rm -rf "$server_dir"; }
trap stop_server EXIT
bash scripts/clickhouse-server.sh start "$server_dir"
export CHSTATE_TEST_SERVER_DIR=$server_dir

test_dir=$(mktemp -d /tmp/chstate-tests.XXXXXX)
export CHSTATE_TEST_DIR=$test_dir
# Each engine's fidelity case leaves its results here; all are checked together below.
export CHSTATE_FIDELITY_RESULTS=$test_dir/fidelity
log=$test_dir/output.log
status=0
# (pipefail: a failing test binary fails the pipeline even though tee succeeds)
# The `cluster` suite needs the replicated rig: on full runs it runs below,
# on its own rig (scripts/check-cluster-suite.sh).
if [[ $# -gt 0 ]]; then
  ./build/tests/chstate_tests "$@" 2>&1 | tee "$log" || status=$?
else
  # Two processes at once (2 cores): the `embedded` suite (chDB's and the
  # test's own CPU, ~10 min) beside all the others (`server`, which mostly
  # waits on the server — its mutations, restarts and timeouts — then the
  # CPU-bound unit, simulated and json suites in that waiting room). Their
  # logs are kept apart and printed whole, the second's after; the tallies
  # below add both up.
  ./build/tests/chstate_tests -tse=cluster,embedded >"$log.others" 2>&1 & others=$!
  # (The lease torture stops at its 520 holders; sharing the cores it may
  # need longer than the 90 s it allows itself alone.)
  CHSTATE_TORTURE_SECONDS=${CHSTATE_TORTURE_SECONDS:-240} \
    ./build/tests/chstate_tests -ts=embedded -tse=cluster 2>&1 | tee "$log.embedded" || status=$?
  wait "$others" || status=1
  cat "$log.others"
  cat "$log.embedded" "$log.others" >"$log"
fi
stage_done tests
# doctest's count of each process, added up: "<passed> <failed>".
doctest_counts() {
  local passed=0 failed=0 line
  while IFS= read -r line; do
    if [[ $line =~ ([0-9]+)\ passed\ \|\ ([0-9]+)\ failed ]]; then
      passed=$((passed + BASH_REMATCH[1])); failed=$((failed + BASH_REMATCH[2]))
    fi
  done < <(grep -E '^\[doctest\] test cases:' "$log" || true)
  echo "$passed $failed"
}
# The hostile-input and fault suites each print one line (tests/tallies.hpp),
# and so does the lease torture; on a full run each must be there with
# enough cases and nothing failed, lost, partial or overlapping.
if [[ $# -eq 0 ]]; then
  # Each process that ran hostile-input cases prints its own line: added up.
  line=$(awk -F'[ =]' '/^hostile-input: cases=[0-9]+ failures=[0-9]+$/ { n++; c += $3; f += $5 }
                       END { if (n) printf "hostile-input: cases=%d failures=%d", c, f }' "$log")
  if [[ $line =~ ^hostile-input:\ cases=([0-9]+)\ failures=([0-9]+)$ ]]; then
    ((BASH_REMATCH[1] >= 300 && BASH_REMATCH[2] == 0)) \
      || { echo "hostile-input: want at least 300 cases and no failure: $line" >&2; status=1; }
  else
    echo "hostile-input: no summary line (the suite did not run)" >&2; status=1
  fi
  line=$(grep -E '^faults: cases=' "$log" | tail -n 1 || true)
  if [[ $line =~ ^faults:\ cases=([0-9]+)\ lost=([0-9]+)\ partial=([0-9]+)$ ]]; then
    ((BASH_REMATCH[1] >= 10 && BASH_REMATCH[2] == 0 && BASH_REMATCH[3] == 0)) \
      || { echo "faults: want at least 10 cases, nothing lost or partial: $line" >&2; status=1; }
  else
    echo "faults: no summary line (the suite did not run)" >&2; status=1
  fi
  # Every statement position of every operation failed, then cancelled, on
  # the scripted transport (tests/faults_and_cancellation.cpp): both lock
  # modes, both dialects.
  line=$(grep -E '^fault-injection: ' "$log" | tail -n 1 || true)
  if [[ $line =~ ^fault-injection:\ operations=([0-9]+)\ points=([0-9]+)\ unhandled=([0-9]+)\ leaked=([0-9]+)$ ]]; then
    ((BASH_REMATCH[2] >= 200 && BASH_REMATCH[3] == 0 && BASH_REMATCH[4] == 0)) \
      || { echo "fault-injection: want at least 200 points, none unhandled or leaked: $line" >&2; status=1; }
  else
    echo "fault-injection: no summary line (the sweep did not run)" >&2; status=1
  fi
  line=$(grep -E '^cancellation: ' "$log" | tail -n 1 || true)
  if [[ $line =~ ^cancellation:\ operations=([0-9]+)\ points=([0-9]+)\ threw=([0-9]+)\ ignored=([0-9]+)$ ]]; then
    ((BASH_REMATCH[2] >= 200 && BASH_REMATCH[3] == 0 && BASH_REMATCH[4] == 0)) \
      || { echo "cancellation: want at least 200 points, none thrown or ignored: $line" >&2; status=1; }
  else
    echo "cancellation: no summary line (the sweep did not run)" >&2; status=1
  fi
  # The strict lease on chDB under chaos (tests/lease_torture.cpp).
  line=$(grep -E '^lease-torture: holders=' "$log" | tail -n 1 || true)
  if [[ $line =~ ^lease-torture:\ holders=([0-9]+)\ live_overlaps=([0-9]+)\ lost_confirmed=([0-9]+)$ ]]; then
    ((BASH_REMATCH[1] >= 500 && BASH_REMATCH[2] == 0 && BASH_REMATCH[3] == 0)) \
      || { echo "lease-torture: want at least 500 holders, no live overlap, no confirmed write lost: $line" >&2; status=1; }
  else
    echo "lease-torture: no summary line (the embedded suite did not run it)" >&2; status=1
  fi
  # The simulator's self-check against chDB (tests/simulator_self_check.hpp).
  line=$(grep -E '^simulator-differential: ' "$log" | tail -n 1 || true)
  if [[ $line =~ ^simulator-differential:\ statements=([0-9]+)\ mismatches=([0-9]+)\ excluded=([0-9]+)$ ]]; then
    ((BASH_REMATCH[1] >= 50 && BASH_REMATCH[2] == 0)) \
      || { echo "simulator-differential: want at least 50 statements and no mismatch: $line" >&2; status=1; }
  else
    echo "simulator-differential: no summary line (the embedded suite did not run it)" >&2; status=1
  fi
fi
# The README's C++ blocks match their compiled files, and those programs run.
bash tests/readme/run.sh build || status=1
stage_done readme
# Exact values (README "Exact values"): every engine's fidelity results
# against Python's json module, in one line.
fidelity_results=("$CHSTATE_FIDELITY_RESULTS"/results-*.tsv)
if [[ -f $CHSTATE_FIDELITY_RESULTS/corpus.tsv && -f ${fidelity_results[0]} ]]; then
  args=()
  for r in "${fidelity_results[@]}"; do args+=(--results "$r"); done
  python3 tests/fidelity/check.py --corpus "$CHSTATE_FIDELITY_RESULTS/corpus.tsv" "${args[@]}" \
    2>"$test_dir/fidelity-mismatches.log" || { status=1; head -n 50 "$test_dir/fidelity-mismatches.log" >&2; }
elif [[ $# -eq 0 ]]; then
  echo "fidelity: no results (the fidelity test cases did not run)" >&2
  status=1
fi
stage_done fidelity
# The `chstate` command-line tool, driven as an operator would (tests/cli):
# every command on chDB and on the server above; one line, `cli: ...`.
if [[ $# -eq 0 ]]; then
  python3 tests/cli/test_cli.py build/tools/chstate --server-dir "$server_dir" 2>"$test_dir/cli.log" \
    || { status=1; grep -E -A 8 '^(FAIL|Traceback|test_cli)' "$test_dir/cli.log" | head -n 80 >&2 || true; }
  stage_done cli
else
  echo "cli: not run (doctest options given; the full run checks it)"
fi
# chstate as a new user gets it (README "Using chstate in your project"): the
# installed package, add_subdirectory, Meson and pkg-config, each building and
# running the main example; one line, `consumers: ...`. Full runs only.
if [[ $# -eq 0 ]]; then
  bash scripts/check-consumers.sh build || status=1
  stage_done consumers
else
  echo "consumers: not run (doctest options given; the full run checks them)"
fi
# Sanitizers (scripts/sanitizers.sh): the suites that never load chDB under
# ASan+UBSan and the concurrency-heavy cases under TSan, against the server
# above; one line, `sanitizers: ...`. Full runs only.
if [[ $# -eq 0 ]]; then
  bash scripts/sanitizers.sh || status=1
  stage_done sanitizers
else
  echo "sanitizers: not run (doctest options given; the full run checks them)"
fi
# The cluster suite (tests/cluster_cases.ipp) on ZooKeeper and 3 replicas
# of 18.16 on loopback, started and stopped by the script; the single server
# above is stopped first (memory, CPU). One line,
# `cluster: replicas=N processes=P acked=A acked_lost=0 overlaps=0 failovers=F`,
# and the suite's doctest count as `cluster-tests: …`. Full runs only.
if [[ $# -eq 0 ]]; then
  stop_server
  bash scripts/check-cluster-suite.sh || status=1
  stage_done cluster
else
  echo "cluster: not run (doctest options given; the full run starts the cluster rig and runs it)"
fi
# Fuzzing (fuzz/, scripts/fuzz.sh): every libFuzzer target for a bounded
# time (CHSTATE_FUZZ_SECONDS each, default 30 here — the full run's budget;
# fuzz.sh alone defaults to 60; two at once); one line,
# `fuzz: targets=N runs=R crashes=0`. Full runs only.
if [[ $# -eq 0 ]]; then
  bash scripts/fuzz.sh "${CHSTATE_FUZZ_SECONDS:-30}" || status=1
  stage_done fuzz
else
  echo "fuzz: not run (doctest options given; the full run fuzzes)"
fi
# Restate doctest's count as the plain closing line CI reads.
expected_summaries=1
[[ $# -gt 0 ]] || expected_summaries=2
if (($(grep -c -E '^\[doctest\] test cases:' "$log" || true) == expected_summaries)); then
  read -r passed failed < <(doctest_counts)
  if ((failed > 0)); then
    # Restated here, next to the closing lines, because the logs above are
    # long and CI keeps only their tail: each failing case's doctest block.
    echo "tests: the failing cases, as doctest reported them:"
    awk '/^=+$/ && length($0) >= 40 { if (block ~ /(ERROR|FATAL): /) printf "%s", block; block = ""; next }
         { block = block $0 "\n" }
         END { if (block ~ /(ERROR|FATAL): /) printf "%s", block }' "$log" | head -n 80
  fi
  echo "tests: $passed passed, $failed failed"
  ((failed == 0)) || status=1
else
  echo "tests: no doctest summary (the test binary did not finish)" >&2
  ((status != 0)) || status=1
fi
echo "timing: ${timings[*]} total=${SECONDS}s"
rm -rf "$test_dir"
exit "$status"
