#!/usr/bin/env bash
# Builds chstate's libFuzzer targets (fuzz/*.cpp) with clang++-14 and runs
# each for a bounded time on a scratch copy of its seed corpus
# (fuzz/corpus/<target>; nothing is written into the repository).
# Prints one line, `fuzz: targets=N runs=R crashes=C` (R: executions, from
# libFuzzer's final stats), then, from the JSON target's final corpus,
# `json-python: …` (fuzz/json_python_check.py: every case against Python's
# json module). Exits non-zero on any crash, leak, timeout or mismatch, with
# the reproducer's path and the start of the report on stderr.
#
# Usage: scripts/fuzz.sh [seconds-per-target]   (default 60; two run at once)
#        scripts/fuzz.sh --build-only             (builds the targets, runs nothing)
# CHSTATE_FUZZ_JOBS: how many targets run at once (default 2; scripts/test.sh
# runs one at a time beside the sanitized runs, which leave a core idle).
# Installs nothing: needs clang-14 and its fuzzer runtime (Debian:
# clang-14 libclang-rt-14-dev libfuzzer-14-dev; scripts/install-deps.sh),
# Boost ≥ 1.81 with Boost.JSON and Boost.URL, OpenSSL, and for chdb_quote
# the libchdb.so that scripts/fetch-chdb.sh caches.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
build_only=0
if [[ ${1:-} == --build-only ]]; then build_only=1; shift; fi
seconds=${1:-60}
[[ $seconds =~ ^[0-9]+$ && $seconds -gt 0 ]] || { echo "fuzz: seconds must be a positive integer, not '$seconds'" >&2; exit 2; }

die() { echo "fuzz: error: $*" >&2; exit 1; }
CXX=clang++-14
command -v "$CXX" >/dev/null 2>&1 || die "$CXX not found: install the Debian packages clang-14 libclang-rt-14-dev libfuzzer-14-dev (bash scripts/install-deps.sh)"
build=$repo/build-fuzz
mkdir -p "$build"
# The fuzzer runtime (libclang_rt.fuzzer) and the sanitizers must link.
probe=$build/.probe.cpp
printf '#include <cstdint>\n#include <cstddef>\nextern "C" int LLVMFuzzerTestOneInput(const std::uint8_t*, std::size_t) { return 0; }\n' >"$probe"
"$CXX" -fsanitize=fuzzer,address,undefined "$probe" -o "$build/.probe" >"$build/.probe.log" 2>&1 \
  || { head -n 5 "$build/.probe.log" >&2; die "clang++-14 cannot build a libFuzzer target: install libclang-rt-14-dev and libfuzzer-14-dev"; }
chdb_version=$(bash "$repo/scripts/fetch-chdb.sh" --print-version)
chdb_lib=${CHSTATE_CHDB_LIBRARY:-$repo/.cache/chdb/$chdb_version/libchdb.so}
[[ -f $chdb_lib ]] || die "libchdb.so not found at $chdb_lib (bash scripts/fetch-chdb.sh caches it; or set CHSTATE_CHDB_LIBRARY)"

# (longest build first: http_exchange compiles Beast, about a minute; two build at a time)
asan_targets=(http_exchange http_reply config json merge sql_quote row_binary)
all_targets=("${asan_targets[@]}" chdb_quote)
flags=(-g -O1 -std=c++20 -I include)
asan=(-fsanitize=fuzzer,address,undefined -fno-sanitize=function)
libs=(-lboost_json -lboost_url -lssl -lcrypto -lpthread -ldl)

# Build (-j2), each target only when its source, fuzz/fuzz_common.hpp or a header changed.
build_one() {
  local t=$1 out=$build/$1
  local newest
  newest=$(find fuzz/"$t".cpp fuzz/fuzz_common.hpp include -newer "$out" -print -quit 2>/dev/null || true)
  if [[ -x $out && -z $newest ]]; then return 0; fi
  local san=("${asan[@]}")
  [[ $t == chdb_quote ]] && san=(-fsanitize=fuzzer) # libchdb.so cannot load under ASan
  if ! "$CXX" "${san[@]}" "${flags[@]}" "fuzz/$t.cpp" -o "$out.tmp" "${libs[@]}" >"$build/$t.build.log" 2>&1; then
    echo "fuzz: building $t failed:" >&2
    head -n 30 "$build/$t.build.log" >&2
    return 1
  fi
  mv "$out.tmp" "$out"
}
build_start=$SECONDS
pids=()
for t in "${all_targets[@]}"; do
  build_one "$t" &
  pids+=($!)
  if ((${#pids[@]} == 2)); then wait "${pids[0]}" || die "build failed"; pids=("${pids[@]:1}"); fi
done
for p in "${pids[@]}"; do wait "$p" || die "build failed"; done
echo "fuzz: built ${#all_targets[@]} targets in $((SECONDS - build_start)) s (build-fuzz/)"
((build_only == 0)) || exit 0

scratch=$(mktemp -d /tmp/chstate-fuzz.XXXXXX)
keep_scratch=0
cleanup() { ((keep_scratch)) || rm -rf "$scratch"; }
trap cleanup EXIT
export CHSTATE_CHDB_LIBRARY=$chdb_lib
export CHSTATE_FUZZ_CHDB_DIR=$scratch/chdb-data

run_one() {
  local t=$1 dir=$scratch/$1
  mkdir -p "$dir/corpus" "$dir/artifacts"
  cp fuzz/corpus/"$t"/* "$dir/corpus/"
  # Over 2.5 GB of memory is a failure, and so is a single input running over 25 s (a hang).
  "$build/$t" -max_total_time="$seconds" -timeout=25 -rss_limit_mb=2560 -print_final_stats=1 \
    -artifact_prefix="$dir/artifacts/" "$dir/corpus" >"$dir/log" 2>&1 && st=0 || st=$?
  echo "$st" >"$dir/status"
}
run_start=$SECONDS
run_jobs=${CHSTATE_FUZZ_JOBS:-2}
[[ $run_jobs =~ ^[1-9][0-9]*$ ]] || die "CHSTATE_FUZZ_JOBS must be a positive integer, not '$run_jobs'"
pids=()
for t in "${all_targets[@]}"; do
  run_one "$t" &
  pids+=($!)
  if ((${#pids[@]} == run_jobs)); then wait "${pids[0]}" || true; pids=("${pids[@]:1}"); fi
done
for p in "${pids[@]}"; do wait "$p" || true; done

runs=0
crashes=0
for t in "${all_targets[@]}"; do
  dir=$scratch/$t
  status=$(cat "$dir/status" 2>/dev/null || echo 1)
  n=$(grep -E '^stat::number_of_executed_units:' "$dir/log" | awk '{print $2}' | tail -n 1)
  runs=$((runs + ${n:-0}))
  if [[ $status != 0 ]]; then
    crashes=$((crashes + 1))
    keep_scratch=1
    artifact=$(ls "$dir/artifacts/" 2>/dev/null | head -n 1)
    echo "fuzz: $t failed (exit $status); reproducer: ${artifact:+$dir/artifacts/$artifact}" >&2
    echo "fuzz:   run it again: $build/$t <reproducer>; full log: $dir/log" >&2
    grep -E -m 1 -A 12 'PROPERTY FAILED|ERROR: |runtime error|SUMMARY|timeout' "$dir/log" | head -n 20 >&2 || tail -n 20 "$dir/log" >&2
    # The input itself, so a log from another machine is enough to reproduce it
    # (printf '%b' '<bytes>' > fuzz/corpus/<target>/<name>).
    if [[ -n $artifact ]]; then
      echo "fuzz:   $(grep -m 1 -E '^INFO: Seed:' "$dir/log" || true); the input ($(wc -c <"$dir/artifacts/$artifact") bytes, first 512 shown):" >&2
      head -c 512 "$dir/artifacts/$artifact" | od -An -v -tx1 | tr -s ' \n' ' ' | sed -e 's/ \([0-9a-f][0-9a-f]\)/\\x\1/g' -e 's/^/fuzz:   /' >&2
      echo >&2
    fi
  fi
done
echo "fuzz: targets=${#all_targets[@]} runs=$runs crashes=$crashes ($((SECONDS - run_start)) s of fuzzing, ${seconds} s per target)"

# The JSON target's final corpus against Python's json module.
status=0
((crashes == 0)) || status=1
dump=$scratch/json/python-dump.tsv
if CHSTATE_FUZZ_JSON_DUMP=$dump "$build/json" -runs=0 "$scratch/json/corpus" >"$scratch/json/dump.log" 2>&1; then
  python3 fuzz/json_python_check.py "$dump" 2>"$scratch/json/python.log" \
    || { status=1; keep_scratch=1; head -n 20 "$scratch/json/python.log" >&2; }
else
  echo "fuzz: running the json target over its corpus failed (log: $scratch/json/dump.log)" >&2
  keep_scratch=1
  status=1
fi
((keep_scratch)) && echo "fuzz: scratch kept at $scratch" >&2
exit "$status"
