#!/usr/bin/env bash
# docs/benchmarks.md's blocks, checked without running the benchmarks
# themselves (minutes each, and benchmarks/run makes a Release build of its
# own). Each block is found on the page by its id (tests/readme/docblocks.py;
# tests/readme/check_snippets.py requires every block to name its check):
#   bench-commands         each `benchmarks/run …` line with benchmarks/run
#                          replaced by the suite this build made
#                          (BUILD_DIR/benchmarks/chstate_bench) and
#                          --benchmark_list_tests=true added: Google Benchmark
#                          parses every flag and filter and lists what it
#                          would run, timing nothing. The quick pass's filter
#                          must leave set_loop out, the traced one select
#                          only update benchmarks.
#   bench-table            the results table: every row a benchmark the suite
#                          registers, its title and headers printed by
#                          suite.cpp (the timings are one run's: not compared)
#   bench-http-overhead    the line as written, ./build/ -> BUILD_DIR/ and DIR
#                          -> a server this script starts and stops
#                          (scripts/clickhouse-server.sh)
#   compile-cost-commands  every option shown is one `scripts/compile-cost.sh
#                          --help` lists, the revision a commit of this
#                          repository (a run takes minutes: not run)
# Prints each check's line, then `docs-benchmarks: blocks=4 failed=N`, and
# exits non-zero on any failure. scripts/test.sh runs it once the
# benchmarks are built.
# Usage: tests/readme/docs_benchmarks.sh BUILD_DIR
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$(cd "${1:?usage: docs_benchmarks.sh BUILD_DIR}" && pwd)
docblock() { python3 "$repo/tests/readme/docblocks.py" "$@"; }
work=$(mktemp -d /tmp/chstate-docs-bench.XXXXXX)
server=$work/server
cleanup() { bash "$repo/scripts/clickhouse-server.sh" stop "$server" >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT
checked=0 failed=0
fail() { echo "docs-benchmarks: FAILED: $*" >&2; failed=$((failed + 1)); }
suite=$build/benchmarks/chstate_bench

# bench-commands
checked=$((checked + 1))
n=0 before=$failed
while IFS= read -r line; do
  n=$((n + 1))
  [[ $line == *"benchmarks/run"* ]] || { fail "bench-commands: '$line' does not run benchmarks/run"; continue; }
  cmd=${line/benchmarks\/run/\"\$suite\" --benchmark_list_tests=true}
  if ! listed=$(cd "$work" && suite=$suite bash -euo pipefail -c "$cmd" 2>"$work/stderr"); then
    fail "bench-commands: '$line' (run as: $cmd): $(head -c 400 "$work/stderr")"; continue
  fi
  # the JSON line writes its listing to bench.json
  [[ $line != *">bench.json"* ]] || listed=$(cat "$work/bench.json")
  count=$(grep -c '^BM_' <<<"$listed")
  if ((count == 0)); then
    fail "bench-commands: '$line' lists no benchmark"
  elif [[ $line == *"-set_loop"* ]] && grep -q set_loop <<<"$listed"; then
    fail "bench-commands: '$line' still selects set_loop"
  elif [[ $line == *"filter=update"* ]] && grep '^BM_' <<<"$listed" | grep -q -v update; then
    fail "bench-commands: '$line' selects more than the update benchmarks"
  fi
done < <(docblock commands bench-commands)
((n == 4)) || fail "bench-commands: expected 4 lines, found $n"
((failed > before)) || echo "docblock bench-commands: ok ($n lines parsed by the suite, each listing what it would run)"

# bench-table
checked=$((checked + 1))
echo "$("$suite" --benchmark_list_tests=true 2>/dev/null)" >"$work/all-benchmarks.txt"
docblock bench-table bench-table "$work/all-benchmarks.txt" || fail "bench-table"

# bench-http-overhead
checked=$((checked + 1))
line=$(docblock commands bench-http-overhead)
if [[ $line != "./build/benchmarks/http_overhead DIR 500" ]]; then
  fail "bench-http-overhead: '$line' is not './build/benchmarks/http_overhead DIR 500'"
elif ! bash "$repo/scripts/clickhouse-server.sh" start "$server" >"$work/server.log" 2>&1; then
  fail "bench-http-overhead: the server did not start: $(tail -n 5 "$work/server.log")"
else
  read -ra words <<<"${line//DIR/$server}"
  words[0]=$build/${words[0]#./build/}
  if out=$(nice -n 5 "${words[@]}" 2>&1); then
    echo "docblock bench-http-overhead: ok (ran; $(tail -n 1 <<<"$out"))"
  else
    fail "bench-http-overhead: ${words[*]}: $out"
  fi
  bash "$repo/scripts/clickhouse-server.sh" stop "$server" >/dev/null 2>&1 || true
fi

# compile-cost-commands
checked=$((checked + 1))
help=$(bash "$repo/scripts/compile-cost.sh" --help)
bad=0
while IFS= read -r line; do
  [[ $line == "bash scripts/compile-cost.sh"* ]] || { fail "compile-cost-commands: '$line'"; bad=1; continue; }
  for opt in $(grep -oE '(^| )--?[a-z][a-z-]*' <<<"$line"); do
    grep -qE -- "(^|[^a-z-])$opt([^a-z-]|$)" <<<"$help" || { fail "compile-cost-commands: --help does not list $opt"; bad=1; }
  done
  rev=$(grep -oE -- '--against [0-9a-f]+' <<<"$line" | cut -d' ' -f2)
  if [[ -n $rev && $(git -C "$repo" rev-parse --is-shallow-repository 2>/dev/null) == true ]]; then
    echo "docblock compile-cost-commands: note: a shallow clone; $rev not looked up"
  elif [[ -n $rev ]] && ! git -C "$repo" cat-file -e "$rev^{commit}" 2>/dev/null; then
    fail "compile-cost-commands: $rev is not a commit of this repository"; bad=1
  fi
done < <(docblock commands compile-cost-commands)
((bad)) || echo "docblock compile-cost-commands: ok (every option in compile-cost.sh --help; the revision a commit)"

echo "docs-benchmarks: blocks=$checked failed=$failed"
((failed == 0))
