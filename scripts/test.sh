#!/usr/bin/env bash
# The README's second command, and what CI runs: installs what is missing,
# fetches chDB, starts a private ClickHouse server, builds everything and runs
# every test. Ends with `tests: N passed, N failed` and a `timing:` line;
# exits non-zero on any failure.
#
# Usage:
#   scripts/test.sh                every test (what CI runs, ~30 min)
#   scripts/test.sh --quick        the quick tier for iteration (≤ 10 min from
#                                  a warm build): the unit, json and simulated
#                                  suites (a quarter of the explorer's random
#                                  schedules), the embedded suite (smaller
#                                  large values and fidelity corpus, no lease
#                                  torture) and the README's checks
#   scripts/test.sh OPTIONS...     the test binary alone, with doctest's options
#                                  (e.g. -ts=unit, -tc='lock:*<server>')
#
# Verdicts belong to the tests: every pass criterion (at least N cases, no
# failure, nothing lost) is a check inside the test that prints its line.
# This script adds the lines of its processes up and prints them, and decides
# nothing itself beyond its runners' exit codes.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

mode=full
if [[ ${1:-} == --quick ]]; then
  mode=quick; shift
  (($# == 0)) || { echo "test.sh: --quick takes no other option" >&2; exit 2; }
elif [[ ${1:-} == -h || ${1:-} == --help ]]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0
elif (($# > 0)); then
  mode=custom
fi

# Each stage's wall time and the CPU time its processes used (user+system,
# all cores), printed as one `timing: …` line at the end: where a run went,
# and which stages wait rather than compute.
timings=() cpu_timings=()
stage_start=$SECONDS
# `times` in this shell (not in a subshell, whose counts start at zero):
# the CPU seconds its finished children have used so far, user + system.
times_file=$(mktemp /tmp/chstate-times.XXXXXX)
cpu_of_times_file() {
  awk 'function sec(x,  m) { m = x; sub(/m.*/, "", m); sub(/^[0-9]+m/, "", x); sub(/s$/, "", x); return m * 60 + x }
       END { printf "%d", sec($1) + sec($2) }' "$times_file"
}
stage_cpu=0
stage_done() {
  local cpu
  times >"$times_file"
  cpu=$(cpu_of_times_file)
  timings+=("$1=$((SECONDS - stage_start))s")
  cpu_timings+=("$1=$((cpu - stage_cpu))s")
  stage_start=$SECONDS stage_cpu=$cpu
}

if [[ $mode == quick ]]; then
  # Only what the quick tier runs: the test binary, the README's programs and
  # the tool that reads the quickstart's state back (tests/readme/run.sh).
  bash scripts/build.sh chstate_tests readme_quickstart readme_values readme_simulated_time \
    readme_simulated_job readme_http readme_separate readme_docs_sql chstate_cli
else
  # Everything the stages below run; the benchmarks and examples (built to
  # prove they compile, run by nobody here) build in the background below.
  bash scripts/build.sh tests/all tools/all
fi
stage_done build

server_dir=$(mktemp -d /tmp/chstate-server.XXXXXX)
second_server_dir=
stop_server() {
  bash scripts/clickhouse-server.sh stop "$server_dir" >/dev/null 2>&1 || true; rm -rf "$server_dir"
  [[ -z $second_server_dir ]] || { bash scripts/clickhouse-server.sh stop "$second_server_dir" >/dev/null 2>&1 || true; rm -rf "$second_server_dir"; }
}
at_exit() {
  # A background build still running when the run ends early: stopped with it.
  [[ -z ${prebuild:-} ]] || kill -TERM -- "-$prebuild" 2>/dev/null || true
  stop_server
}
trap at_exit EXIT
bash scripts/clickhouse-server.sh start "$server_dir"
export CHSTATE_TEST_SERVER_DIR=$server_dir

test_dir=$(mktemp -d /tmp/chstate-tests.XXXXXX)
export CHSTATE_TEST_DIR=$test_dir
prebuild=
if [[ $mode == full ]]; then
  # The benchmarks, the examples, the sanitized test binaries and the fuzz
  # targets build in the background from here at the lowest CPU priority
  # (nice 19): they take the CPU the stages below leave idle (the CLI's, the
  # consumers' and the cluster's waits on servers, single-threaded links) and
  # hardly any they use, so the later stages start from built binaries. A
  # failure here is not the verdict: those stages build again and report it.
  # Its own process group (job control on for this one job), stopped whole
  # if the run ends first; not its own session: with the kernel's autogroups
  # a new session (setsid) is scheduled as a peer of this one, nice 19 or not
  # — measured: it then took half the CPU, and the tests stage went from
  # 543 s to 923 s.
  set -m
  nice -n 19 bash -c 'bash scripts/build.sh benchmarks/all examples/all >/dev/null &&
    bash scripts/fuzz.sh --build-only && bash scripts/sanitizers.sh --build-only' \
    >"$test_dir/prebuild.log" 2>&1 & prebuild=$!
  set +m
fi
# Each engine's fidelity case leaves its results here; all are checked together below.
export CHSTATE_FIDELITY_RESULTS=$test_dir/fidelity
log=$test_dir/output.log
status=0
processes=1 # doctest summaries expected in $log
# (pipefail: a failing test binary fails the pipeline even though tee succeeds)
# The `cluster` suite needs the replicated rig: on full runs it runs below,
# on its own rig (scripts/check-cluster-suite.sh).
case $mode in
custom)
  ./build/tests/chstate_tests "$@" 2>&1 | tee "$log" || status=$?
  ;;
full | quick)
  # Processes at once, each the critical path of nothing the others need:
  # the `embedded` suite (chDB's and the test's own CPU) beside the others.
  # Full: three more — the `server` suite (it mostly waits on the server:
  # its mutations, restarts and timeouts); the server's fidelity case (it
  # waits on a second server of its own, since the server suite stops and
  # kills the first) followed by the CPU-bound unit, simulated and json
  # suites; and the endless-reply series (tests/endless_replies.ipp, about
  # two minutes of waiting on that second server). Measured, 2 processes:
  # the server suite and those suites in one took 682 s beside embedded's
  # 484 s; the server suite alone 557 s, its fidelity case 179 s of that. Quick: unit, json, simulated beside
  # embedded. Their logs are kept apart and printed whole, in turn; the
  # lines below add them up.
  if [[ $mode == quick ]]; then
    groups=("-ts=unit,json,simulated")
    embedded=(-ts=embedded -tse=cluster -tce='*lease-torture*')
    # Smaller sizes, the same code paths: a quarter of the explorer's seeded
    # random schedules, an 8 MB large value, 100 random fidelity states.
    export CHSTATE_SCHEDULES_PERCENT=${CHSTATE_SCHEDULES_PERCENT:-25}
    export CHSTATE_LARGE_STATE_MB=${CHSTATE_LARGE_STATE_MB:-8}
    export CHSTATE_FIDELITY_RANDOM=${CHSTATE_FIDELITY_RANDOM:-100}
  else
    second_server_dir=$(mktemp -d /tmp/chstate-server2.XXXXXX)
    bash scripts/clickhouse-server.sh start "$second_server_dir"
    # One group per process; a group's doctest runs, separated by `;`, run in turn.
    # (doctest's `?` stands for the spaces a group's words cannot hold)
    endless='hostile-input:?every?statement*'
    groups=("-ts=server -tce=fidelity:*,$endless"
            "CHSTATE_TEST_SERVER_DIR=$second_server_dir -ts=server -tc=fidelity:*;-ts=unit,json,simulated"
            "CHSTATE_TEST_SERVER_DIR=$second_server_dir -ts=server -tc=$endless")
    embedded=(-ts=embedded -tse=cluster)
  fi
  # run_group N "RUNS": each run's doctest options (an optional leading
  # VAR=value sets the environment of that run), its output into $log.N,
  # then the group's wall time (which one the stage waits for).
  run_group() {
    local n=$1 start=$SECONDS run words envs rc=0
    local IFS=';'
    for run in $2; do
      IFS=' ' read -r -a words <<<"$run"
      envs=()
      while [[ ${words[0]} == *=* && ${words[0]} != -* ]]; do envs+=("${words[0]}"); words=("${words[@]:1}"); done
      env "${envs[@]}" ./build/tests/chstate_tests "${words[@]}" >>"$log.$n" 2>&1 || rc=1
    done
    echo "tests[group $n]: wall=$((SECONDS - start))s ($2)" >>"$log.$n"
    return "$rc"
  }
  group_pids=()
  for n in "${!groups[@]}"; do
    : >"$log.$n"
    run_group "$n" "${groups[$n]}" & group_pids+=($!)
    processes=$((processes + $(tr -cd ';' <<<"${groups[$n]}" | wc -c) + 1))
  done
  embedded_start=$SECONDS
  ./build/tests/chstate_tests "${embedded[@]}" 2>&1 | tee "$log.embedded" || status=$?
  echo "tests[embedded]: wall=$((SECONDS - embedded_start))s" | tee -a "$log.embedded"
  for pid in "${group_pids[@]}"; do wait "$pid" || status=1; done
  cp "$log.embedded" "$log"
  for n in "${!groups[@]}"; do cat "$log.$n"; cat "$log.$n" >>"$log"; done
  [[ -z ${second_server_dir:-} ]] || { bash scripts/clickhouse-server.sh stop "$second_server_dir" >/dev/null 2>&1 || true; rm -rf "$second_server_dir"; second_server_dir=; }
  ;;
esac
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
# The suites' own summary lines (each decided by the test that prints it),
# restated together near the end where CI's kept tail shows them. The
# hostile-input line comes from each process that ran such cases: added up.
summary_lines() {
  awk -F'[ =]' '/^hostile-input: cases=[0-9]+ failures=[0-9]+$/ { n++; c += $3; f += $5 }
                END { if (n) printf "hostile-input: cases=%d failures=%d (%d processes)\n", c, f, n }' "$log"
  sed -nE 's/^destroy-inflight\[.*\]: operations=([0-9]+) lost_handlers=([0-9]+) called_twice=([0-9]+)$/\1 \2 \3/p' "$log" |
    awk '{ n++; o += $1; l += $2; t += $3 }
         END { if (n) printf "destroy-inflight: operations=%d lost_handlers=%d called_twice=%d (%d stores)\n", o, l, t, n }'
  grep -E '^(faults: cases=|fault-injection: |cancellation: |lease-torture: holders=|update-short-lease: |simulator-differential: |lock-schedules(\[cluster\])?: |lock-stress: |glob-complexity: |move-race(\[.*\])?: |lock-timeout(\[.*\])?: |dedup-guard: )' "$log" || true
}

if [[ $mode != custom ]]; then
  # Every fenced block of the README and docs/ has a check the tests run
  # (check_snippets.py: verbatim blocks, the pages' SQL, the tests each page
  # names); the README's programs run, and the blocks run.sh names are run or
  # compared (the explorer's lines against $log, which is why it comes here).
  bash tests/readme/run.sh build || status=1
  stage_done readme
fi
# Exact values (docs/values.md): every engine's fidelity results
# against Python's json module, in one line.
fidelity_results=("$CHSTATE_FIDELITY_RESULTS"/results-*.tsv)
if [[ -f $CHSTATE_FIDELITY_RESULTS/corpus.tsv && -f ${fidelity_results[0]} ]]; then
  args=()
  for r in "${fidelity_results[@]}"; do args+=(--results "$r"); done
  python3 tests/fidelity/check.py --corpus "$CHSTATE_FIDELITY_RESULTS/corpus.tsv" "${args[@]}" \
    2>"$test_dir/fidelity-mismatches.log" || { status=1; head -n 50 "$test_dir/fidelity-mismatches.log" >&2; }
elif [[ $mode != custom ]]; then
  echo "fidelity: no results (the fidelity test cases did not run)" >&2
  status=1
fi
stage_done fidelity

if [[ $mode == full ]]; then
  # The `chstate` command-line tool, driven as an operator would (tests/cli):
  # every command on chDB and on the server above; one line, `cli: ...`.
  # It mostly waits on the tool's engines (measured: 108 s of CPU in 167 s),
  # so it runs beside the next stage, which compiles.
  python3 tests/cli/test_cli.py build/tools/chstate --server-dir "$server_dir" >"$test_dir/cli.out" 2>"$test_dir/cli.log" &
  cli_pid=$!
  # chstate as a new user gets it (docs/using-chstate.md):
  # the installed package, add_subdirectory, Meson and pkg-config, each
  # building and running the main example; one line, `consumers: ...`.
  bash scripts/check-consumers.sh build || status=1
  if ! wait "$cli_pid"; then
    status=1
    cat "$test_dir/cli.out"
    grep -E -A 8 '^(FAIL|Traceback|test_cli)' "$test_dir/cli.log" | head -n 80 >&2 || true
  else
    cat "$test_dir/cli.out"
  fi
  # The tool's hostile inputs count with the test binary's (summary_lines).
  grep -E '^hostile-input: cases=[0-9]+ failures=[0-9]+$' "$test_dir/cli.out" >>"$log" || true
  stage_done cli-and-consumers
  # The cluster suite (tests/cluster_cases.ipp) on ZooKeeper and 3 replicas
  # of 18.16 on loopback, started and stopped by the script; the single
  # server above is stopped first (memory, CPU). Its stress case prints
  # `cluster: replicas=N processes=P acked=A acked_lost=0 overlaps=0
  # failovers=F`, the script `cluster-tests: N passed, N failed`. It runs
  # before the sanitizers and fuzzing: it mostly waits on the rig, and the
  # background build uses that time.
  stop_server
  unset CHSTATE_TEST_SERVER_DIR
  bash scripts/check-cluster-suite.sh --no-build || status=1
  stage_done cluster
  # What is left of it is now the run's only work: back to normal priority
  # where this user may raise it (root), so a busy machine does not starve it.
  renice -n 0 -g "$prebuild" >/dev/null 2>&1 || true
  wait "$prebuild" || echo "prebuild: the background build failed (the stages below build again): $(tail -n 3 "$test_dir/prebuild.log")" >&2
  prebuild=
  # The benchmarks and examples are built by nothing else: their build is a
  # verdict (a no-op when the background build made them; else it shows why).
  bash scripts/build.sh benchmarks/all examples/all >"$test_dir/build-rest.log" 2>&1 \
    || { status=1; echo "build: the benchmarks or examples do not build:" >&2; grep -E -m 20 -A 5 'error|FAILED' "$test_dir/build-rest.log" >&2 || tail -n 30 "$test_dir/build-rest.log" >&2; }
  # docs/benchmarks.md's blocks, against the suite just built (its flags
  # parsed and benchmarks listed, not run) and a server of its own.
  bash tests/readme/docs_benchmarks.sh build || status=1
  stage_done prebuild-wait
  # Fuzzing (fuzz/, scripts/fuzz.sh): every libFuzzer target for a bounded
  # time (CHSTATE_FUZZ_SECONDS each, default 12 here — the full run's
  # budget, smoke and regression over the seeds rather than a search;
  # fuzz.sh alone defaults to 60), one target at a time, beside the
  # sanitized runs below: those are one CPU-bound process and one that
  # mostly waits on the server (measured: 478 s of CPU in 435 s, a core
  # idle), and fuzzing after them took another 89 s. One line, `fuzz:
  # targets=N runs=R crashes=0`, printed after the sanitizers' lines.
  CHSTATE_FUZZ_JOBS=1 bash scripts/fuzz.sh "${CHSTATE_FUZZ_SECONDS:-12}" >"$test_dir/fuzz.log" 2>&1 & fuzz_pid=$!
  # Sanitizers (scripts/sanitizers.sh): the suites that never load chDB
  # under ASan+UBSan and the concurrency-heavy cases under TSan, against a
  # server of its own; one line, `sanitizers: ...`.
  bash scripts/sanitizers.sh || status=1
  wait "$fuzz_pid" || status=1
  cat "$test_dir/fuzz.log"
  stage_done sanitizers-and-fuzz
elif [[ $mode == custom ]]; then
  echo "cli, consumers, sanitizers, cluster, fuzz: not run (doctest options given; the full run runs them)"
else
  echo "cli, consumers, sanitizers, cluster, fuzz, the server suite and the lease torture: not run (--quick; the full run runs them)"
fi

# Restate doctest's count as the plain closing line CI reads.
if (($(grep -c -E '^\[doctest\] test cases:' "$log" || true) == processes)); then
  read -r passed failed < <(doctest_counts)
  if ((failed > 0)); then
    # Restated here, next to the closing lines, because the logs above are
    # long and CI keeps only their tail: each failing case's doctest block.
    echo "tests: the failing cases, as doctest reported them:"
    awk '/^=+$/ && length($0) >= 40 { if (block ~ /(ERROR|FATAL): /) printf "%s", block; block = ""; next }
         { block = block $0 "\n" }
         END { if (block ~ /(ERROR|FATAL): /) printf "%s", block }' "$log" | head -n 80
  fi
  summary_lines
  echo "tests: $passed passed, $failed failed"
  ((failed == 0)) || status=1
else
  echo "tests: no doctest summary (a test binary did not finish)" >&2
  ((status != 0)) || status=1
fi
echo "timing: ${timings[*]} total=${SECONDS}s"
echo "timing (CPU of all cores): ${cpu_timings[*]}"
rm -rf "$test_dir" "$times_file"
exit "$status"
