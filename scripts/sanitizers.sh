#!/usr/bin/env bash
# Sanitized test runs (README "Tests"), run by scripts/test.sh on full runs.
#
# Builds the test binary without the embedded engine twice with clang 14
# (tests/CMakeLists.txt; ASan -O1, TSan -O0, both -gline-tables-only):
#   build-asan/  chstate_tests_no_chdb, -fsanitize=address,undefined
#                -fno-sanitize=function -fno-sanitize-recover=all
#   build-tsan/  chstate_tests_tsan (the files that hold the TSan cases),
#                -fsanitize=thread
# then runs the suites that do not load chDB under ASan+UBSan (LeakSanitizer
# included) and the concurrency-heavy cases under TSan. One line:
#   sanitizers: asan_ubsan=passed|failed tsan=passed|failed
# and a non-zero exit on any report, with the report's first lines on stderr.
#
# The server cases need a running ClickHouse: CHSTATE_TEST_SERVER_DIR as
# scripts/test.sh exports it; without it this script starts its own. The
# TSan cases run beside them on a second server this script starts.
# Usage: scripts/sanitizers.sh      (CHSTATE_BUILD_JOBS: compile jobs, 2)
#        scripts/sanitizers.sh --build-only   (builds both binaries, runs nothing)
set -euo pipefail
build_only=0
if [[ ${1:-} == --build-only ]]; then build_only=1; shift; fi
(($# == 0)) || { echo "sanitizers: unknown argument '$1' (usage: scripts/sanitizers.sh [--build-only])" >&2; exit 2; }
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

# ---- what runs where: the one place --------------------------------------
#
# chDB is never loaded in a sanitized run: libchdb.so crashes inside its own
# start-up under ASan. Three fences keep it out:
#  1. the `embedded` suite is not compiled into chstate_tests_no_chdb at all
#     (tests/embedded.cpp is left out; tests/sanitizers/no_chdb.cpp stands in
#     for its shared_engine() and throws, naming this file);
#  2. every other test case that opens the embedded engine is excluded by
#     name here (chdb_cases), and each name must still match a test case;
#  3. the binary is built, and run, with CHSTATE_CHDB_LIBRARY pointing at
#     tests/sanitizers/chdb_guard.c, a libchdb.so whose loading aborts the run
#     saying why: any path to chDB a new test takes stops loudly.
chdb_cases=(
  "open: a clickhouse:// URI and a chdb: URI*" # server.cpp: opens this process's chDB folder beside the server
  "destroy-inflight: open(chdb:)*"             # server.cpp: the same, and a child process on a folder of its own
)
# Left to the plain run: the endless-reply series through chstate::open (the
# typed store's series runs here and covers the same transport code; the
# second series only adds minutes of waiting on the server under ASan).
plain_only_cases=(
  "hostile-input: every statement*chstate::open"
)
# ASan+UBSan: every suite that does not need chDB (server in a process of
# its own, beside the others), in two processes of about equal CPU: the
# explorer's cases, and the rest of simulated with unit and json. (In one
# process they took 405 s of the stage's 416 s while a core sat idle beside
# the server lane's waits.)
asan_local_suites=unit,json,simulated
asan_explorer_cases="lock-schedules:*"
# TSan: the cases where threads really meet, not the whole suites (TSan runs
# 5-15x slower, and most cases are one thread handing work to one other):
tsan_cases=(
  # 8 threads, each with its own store, on one simulated server whose
  # statements run on a shared pool: acquire, read-modify-write, fence, release.
  "lock torture on the simulation*"
  # Timed-out acquires: blocking calls hand their held claims to background
  # threads, async ones leave them on the store's executor; stores destroyed
  # while that work runs.
  "lock-timeout on the simulation*"
  # 8 processes (this binary, re-executed) each with a 4-thread transport pool.
  "lock stress: 8 processes*"
  # 40 coroutines on one io_context over a 3-connection pool on 4 threads.
  "http: many coroutines over a small pool*"
  # The caller's own io_context and the transport's threads.
  "open: async forms from a coroutine*"
  # A thread advancing a manual_clock completes the waits of a blocking call
  # on another thread, whose io_context ends with the call (drive()).
  "manual_clock: a blocking call that must wait on a clock nothing drives*"
  # Cancellation and timeouts race a pending read on the pool's threads.
  "http: cancellation through the handler's slot*"
  "http: the request timeout*"
  "http: a sink error abandons the statement"
  # Pooled connections the server closed: keep-alive expiry and restarts.
  "http: idle longer than the keep-alive timeout*"
  "http: server restarted between two operations*"
  # The lock protocol on the real server: background releases (a lease
  # destroyed unreleased), heartbeats on a timer, cancelled acquires, and
  # completion tokens of every kind (coroutine, future, callback).
  # (The contract's cases are templated: "<what>" then the fixture's name.)
  "lock:*<server>"
  "strict lock:*<server>"
  "operations accept any completion token*<server>"
)
# The simulated lock-schedule explorer runs under ASan+UBSan only: it is one
# thread deciding the order of every step, so TSan has nothing to find there.

jobs=${CHSTATE_BUILD_JOBS:-2}
# The binaries (tests/CMakeLists.txt): ASan+UBSan every translation unit but
# chDB's; TSan only those that hold its cases.
target_of() { if [[ $1 == tsan ]]; then echo chstate_tests_tsan; else echo chstate_tests_no_chdb; fi; }
clang_c=clang-14
clang_cxx=clang++-14
work=$(mktemp -d /tmp/chstate-sanitizers.XXXXXX)
server_dir= tsan_server_dir=
cleanup() {
  local d
  for d in "$server_dir" "$tsan_server_dir"; do
    [[ -n $d ]] || continue
    bash scripts/clickhouse-server.sh stop "$d" >/dev/null 2>&1 || true
    rm -rf "$d"
  done
  rm -rf "$work"
}
trap cleanup EXIT
now() { date +%s; }
join_by() { local IFS=$1; shift; echo "$*"; }

command -v "$clang_cxx" >/dev/null 2>&1 || bash scripts/install-deps.sh >/dev/null
command -v "$clang_cxx" >/dev/null 2>&1 || { echo "sanitizers: $clang_cxx not found (scripts/install-deps.sh installs it)" >&2; exit 1; }

if [[ -z ${CHSTATE_TEST_SERVER_DIR:-} ]] && ((build_only == 0)); then
  server_dir=$(mktemp -d /tmp/chstate-sanitizers-server.XXXXXX)
  bash scripts/clickhouse-server.sh start "$server_dir" >/dev/null
  export CHSTATE_TEST_SERVER_DIR=$server_dir
fi
export CHSTATE_TEST_DIR=$work
# (scripts/test.sh checks its own fidelity results; these runs keep theirs to themselves)
unset CHSTATE_FIDELITY_RESULTS
# "large values" (tests/large_values_cases.ipp) with an 8 MB state instead of
# 100 MB: the same code paths and sizes far past every buffer; at 100 MB the
# server case alone takes 5 minutes under ASan (the normal run keeps 100 MB
# on chDB, 32 MB on the server).
export CHSTATE_LARGE_STATE_MB=${CHSTATE_LARGE_STATE_MB:-8}
# The schedule explorer (tests/simulation.cpp) with a tenth of its seeded
# random schedules (a prefix of the same sequence; exhaustive classes keep
# theirs): every step of the protocols still runs under ASan, hundreds of
# times; all of them took ~500 s of the ~600 s no-engine run under ASan (a
# quarter, the whole stage's longest process); the plain run explores them
# all and gives the verdicts.
export CHSTATE_SCHEDULES_PERCENT=${CHSTATE_SCHEDULES_PERCENT:-10}
# The fidelity cases (tests/fidelity_cases.ipp) with their 326 fixed states
# and 100 random ones instead of 1000: every code path, each kind of value;
# the full run checks all 1326 against Python. With 1000 they took 773 s of
# the server run and 500 s of the local one under ASan.
export CHSTATE_FIDELITY_RANDOM=${CHSTATE_FIDELITY_RANDOM:-100}

# llvm-symbolizer for readable stacks (Debian installs it unversioned only here).
export PATH=/usr/lib/llvm-14/bin:$PATH
# Sanitizer settings. Suppressions, each with its reason, in tests/sanitizers/.
sup=$repo/tests/sanitizers
export ASAN_OPTIONS="detect_leaks=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1:detect_odr_violation=2"
export LSAN_OPTIONS="suppressions=$sup/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$sup/tsan.supp:print_suppressions=0"

# The optimisation of each build. ASan: -O1 (its runs are the long ones: the
# explorer and the server suite). TSan: -O0 with line tables (its 28 cases
# run in under a minute either way, and -O0 compiles the large test files
# about three times faster: simulation.cpp 54 s instead of 187 s).
optimization_of() { if [[ $1 == tsan ]]; then echo "-O0 -gline-tables-only"; else echo "-O1 -gline-tables-only"; fi; }
# ...except these, -O0 in both: server.cpp's cases mostly wait on the server,
# and at -O1 it was the costliest compile of the whole run (under ASan: 157
# CPU-s at -O0, measured with clang 14 on this machine); the cases of
# faults_and_cancellation.cpp take 2 s.
o0_sources="server.cpp;faults_and_cancellation.cpp"
# build KIND FLAGS...: configures (always; a no-op when nothing changed) and
# builds build-KIND/ with the guard libchdb.so (tests/sanitizers/chdb_guard.c).
build() {
  local kind=$1; shift
  local dir=build-$kind flags="$*"
  mkdir -p "$dir/chdb-guard"
  "$clang_c" -O1 -shared -fPIC -o "$dir/chdb-guard/libchdb.so" tests/sanitizers/chdb_guard.c
  CC=$clang_c CXX=$clang_cxx cmake -S . -B "$dir" -G Ninja \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$(optimization_of "$kind")" \
    -DCMAKE_CXX_FLAGS="$flags -fno-omit-frame-pointer" -DCMAKE_EXE_LINKER_FLAGS="$flags" \
    -DCHSTATE_BUILD_TOOLS=OFF -DCHSTATE_CHDB_LIBRARY="$repo/$dir/chdb-guard/libchdb.so" \
    -DCHSTATE_TESTS_O0_SOURCES="$o0_sources" \
    >"$work/$kind-configure.log" 2>&1 || { tail -n 30 "$work/$kind-configure.log" >&2; return 1; }
  ninja -C "$dir" -j "$jobs" "$(target_of "$kind")" >"$work/$kind-build.log" 2>&1 \
    || { grep -E -m 20 -A 5 'error|FAILED' "$work/$kind-build.log" >&2 || tail -n 30 "$work/$kind-build.log" >&2; return 1; }
}

# The two builds' flags (--build-only builds the same binaries the runs below use).
asan_flags=(-fsanitize=address,undefined -fno-sanitize=function -fno-sanitize-recover=all)
tsan_flags=(-fsanitize=thread)
if ((build_only)); then
  # Both at once (scripts/test.sh runs this in the background at nice 19):
  # one build's last large file then compiles beside the other's files
  # instead of alone.
  ok=0
  t0=$(now)
  build tsan "${tsan_flags[@]}" & tsan_build=$!
  build asan "${asan_flags[@]}" && ok=$((ok + 1))
  wait "$tsan_build" && ok=$((ok + 1))
  echo "sanitizers: built $ok of 2 binaries in $(($(now) - t0)) s"
  ((ok == 2)) && exit 0 || exit 1
fi

report_pattern='ERROR: (Address|Leak)Sanitizer|runtime error:|WARNING: ThreadSanitizer|ERROR: ThreadSanitizer|FATAL: ThreadSanitizer|chstate sanitizers:'
# First lines of any sanitizer report (or of the failure) in LOG, on stderr.
show_report() {
  local log=$1 kind=$2
  if grep -qE "$report_pattern" "$log"; then
    echo "sanitizers[$kind]: report (first lines; full log kept in $3):" >&2
    grep -E -m 1 -B 2 -A 40 "$report_pattern" "$log" >&2 || true
  else
    echo "sanitizers[$kind]: the test run failed without a sanitizer report (full log kept in $3); failures:" >&2
    grep -E -B 2 -A 12 'ERROR:|FATAL ERROR|TEST CASE:' "$log" | head -n 60 >&2 || tail -n 40 "$log" >&2
  fi
}

# The count doctest's --list-test-cases ends with (0 when absent).
listed_count() {
  local n
  n=$(sed -n 's/^\[doctest\] unskipped test cases passing the current filters: \([0-9]*\).*/\1/p' | tail -n 1)
  echo "${n:-0}"
}

# run LABEL KIND PREFIX-ARGV... -- DOCTEST-OPTIONS...: runs build-KIND's
# binary, the chdb_cases (and run_exclude, when set) excluded; checks the selection first (some case
# runs; every chdb_cases name still matches a case). LABEL names the log.
run() {
  local label=$1 kind=$2; shift 2
  local prefix=()
  while [[ $1 != -- ]]; do prefix+=("$1"); shift; done
  shift
  local exe=build-$kind/tests/$(target_of "$kind") log=$work/$label.log
  local exclude count c status=0
  exclude=$(join_by , "${chdb_cases[@]}" "${plain_only_cases[@]}" ${run_exclude:+"$run_exclude"})
  count=$("${prefix[@]}" "$exe" --list-test-cases --no-version "$@" -tce="$exclude" 2>&1 | listed_count)
  ((count > 0)) || { echo "sanitizers[$label]: the selection matches no test case" >&2; return 1; }
  for c in "${chdb_cases[@]}"; do
    (($("${prefix[@]}" "$exe" --list-test-cases --no-version -tc="$c" 2>&1 | listed_count) > 0)) \
      || { echo "sanitizers[$label]: chdb_cases entry '$c' matches no test case: update scripts/sanitizers.sh" >&2; return 1; }
  done
  local start=$SECONDS
  CHSTATE_CHDB_LIBRARY=$repo/build-$kind/chdb-guard/libchdb.so \
    "${prefix[@]}" "$exe" --no-version "$@" -tce="$exclude" >"$log" 2>&1 || status=$?
  local summary
  summary=$(grep -E '^\[doctest\] test cases:' "$log" | tail -n 1 | sed 's/^\[doctest\] test cases: *//; s/  */ /g')
  echo "sanitizers[$label]: ${summary:-no doctest summary} (of $count selected) in $((SECONDS - start)) s"
  if ((status != 0)) || grep -qE "$report_pattern" "$log"; then
    cp "$log" "$repo/build-$kind/sanitizers-$label.log"
    show_report "$log" "$label" "build-$kind/sanitizers-$label.log"
    return 1
  fi
}

echo "sanitizers: never run sanitized (they load chDB): suite embedded (not built), $(join_by , "${chdb_cases[@]}")"
echo "sanitizers: run plain only: $(join_by , "${plain_only_cases[@]}")"
asan=failed tsan=failed
# TSan on clang 14 cannot map its shadow with the large mmap randomisation
# newer kernels use ("unexpected memory mapping"): run without address space
# randomisation where this machine allows it (the stress children inherit it).
norandom=()
if setarch "$(uname -m)" -R true >/dev/null 2>&1; then norandom=(setarch "$(uname -m)" -R); fi
t0=$(now)
asan_built=0 tsan_built=0
build asan "${asan_flags[@]}" && asan_built=1
build tsan "${tsan_flags[@]}" && tsan_built=1
t1=$(now)
echo "sanitizers: built asan_ubsan=$asan_built tsan=$tsan_built in $((t1 - t0)) s"
# Everything at once. The no-engine suites under ASan are all CPU (the
# explorer above all); the server suite under ASan mostly waits on its
# server, and so do the TSan cases, on a server of their own: both stop and
# restart theirs (faults:, "server restarted …"), so they cannot share one.
# (In one lane, TSan's minute and a half came after the ASan server run's
# eight: the stage waited for their sum.)
# The ASan server suite is split in two: the cases below (the longest that
# neither stop nor restart a server; measured under ASan: lock stress 62 s,
# keep-alive idling 47 s, the endless replies 34 s, the server move-race
# 20 s, of 342 s) run on TSan's server once TSan's cases are done; the rest,
# with every case that stops, kills or restarts its server, on the first.
# (In one lane the stage waited 445 s for it while a core was idle.)
asan_second_server_cases=(
  "lock stress: 8 processes*"
  "faults: writes after idling across the server's keep-alive timeout*"
  "hostile-input: every statement of every operation answered without end*"
  "move-race: *(server*"
)
server_lane() {
  local ok=0
  if ((asan_built)); then
    run_exclude=$(join_by , "${asan_second_server_cases[@]}") run asan_ubsan-server asan -- -ts=server || ok=1
  else ok=1; fi
  return "$ok"
}
# Its exit status: 1 if TSan failed, 2 if the ASan cases failed, 3 both.
tsan_lane() {
  local t=$(now) failed=0
  if ((tsan_built)); then
    CHSTATE_TEST_SERVER_DIR=$tsan_server_dir run tsan tsan "${norandom[@]}" -- -tc="$(join_by , "${tsan_cases[@]}")" \
      || failed=1
    echo "sanitizers[tsan]: ran in $(($(now) - t)) s"
  else failed=1; fi
  local c
  if ((asan_built)); then
    for c in "${asan_second_server_cases[@]}"; do # (a stale entry would drop its case from both runs)
      (($(build-asan/tests/chstate_tests_no_chdb --list-test-cases --no-version -ts=server -tc="$c" 2>&1 | listed_count) > 0)) \
        || { echo "sanitizers: asan_second_server_cases entry '$c' matches no server case: update scripts/sanitizers.sh" >&2
             return $((failed | 2)); }
    done
    CHSTATE_TEST_SERVER_DIR=$tsan_server_dir run asan_ubsan-server2 asan -- -ts=server \
      -tc="$(join_by , "${asan_second_server_cases[@]}")" || failed=$((failed | 2))
  else failed=$((failed | 2)); fi
  return "$failed"
}
if ((tsan_built || asan_built)); then
  # Started here, not in the lane's subshell, so that cleanup stops it.
  tsan_server_dir=$(mktemp -d /tmp/chstate-sanitizers-tsan-server.XXXXXX)
  bash scripts/clickhouse-server.sh start "$tsan_server_dir" >/dev/null || { tsan_built=0 asan_built=0; }
fi
server_lane & server_run=$!
tsan_lane & tsan_run=$!
# The no-engine suites with no server either (its variable unset) and
# chDB's stand-in that aborts if loaded: they must pass with neither.
local_ok=0
if ((asan_built)); then
  run asan_ubsan-explorer asan env -u CHSTATE_TEST_SERVER_DIR -- -ts="$asan_local_suites" -tc="$asan_explorer_cases" & explorer_run=$!
  run_exclude=$asan_explorer_cases run asan_ubsan asan env -u CHSTATE_TEST_SERVER_DIR -- -ts="$asan_local_suites" && local_ok=1
  wait "$explorer_run" || local_ok=0
fi
server_ok=1 tsan_ok=1 lane=0
wait "$server_run" || server_ok=0
wait "$tsan_run" || lane=$?
((lane & 1)) && tsan_ok=0
((lane & 2)) && server_ok=0
((asan_built && local_ok && server_ok)) && asan=passed
((tsan_built && tsan_ok)) && tsan=passed
echo "sanitizers: ran in $(($(now) - t1)) s"
echo "sanitizers: asan_ubsan=$asan tsan=$tsan"
[[ $asan == passed && $tsan == passed ]]
