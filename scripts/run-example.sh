#!/usr/bin/env bash
# The README's first command: builds and runs the main example
# (examples/01_resumable_pipeline.cpp) on the embedded engine. Run it twice:
# the second run resumes from the bookmark.
#
# It installs only what the example needs (scripts/install-deps.sh
# --example: a compiler, Boost, npm), fetches chDB once (~166 MB, into
# .cache/chdb/), and compiles the one file with the plain compiler flags the
# README lists, into build-example/ (again only when a source changed),
# saying what it does at each step.
#
# Usage: scripts/run-example.sh [--help] [example arguments...]
#   example arguments: [--batches N] [--reset] [URI] (see --help)
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
say() { echo "run-example: $*" >&2; }

for arg in "$@"; do
  if [[ $arg == --help || $arg == -h ]]; then
    sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
    echo
    if [[ -x build-example/01_resumable_pipeline ]]; then
      build-example/01_resumable_pipeline --help
    else
      echo "The example's own options: [--batches N] [--reset] [URI] (built on first run)."
    fi
    exit 0
  fi
done

say "checking the packages the example needs (g++, Boost, npm)…"
bash scripts/install-deps.sh --example >&2
say "fetching the embedded engine, chDB (once; ~166 MB)…"
lib=$(bash scripts/fetch-chdb.sh | tail -n 1)
bin=build-example/01_resumable_pipeline
mkdir -p build-example
if [[ ! -x $bin ]] || [[ -n $(find examples/01_resumable_pipeline.cpp include -newer "$bin" -print -quit) ]]; then
  say "compiling examples/01_resumable_pipeline.cpp (about a minute, once)…"
  g++ -std=c++20 -O1 -Iinclude \
    -DCHSTATE_CHDB_DEFAULT_LIBRARY="\"$lib\"" \
    -DCHSTATE_CHDB_FETCH_COMMAND="\"bash $repo/scripts/fetch-chdb.sh\"" \
    examples/01_resumable_pipeline.cpp -o "$bin.tmp" -lboost_json -lboost_url -pthread -ldl
  mv -f "$bin.tmp" "$bin"
fi
say "running it:"
exec "./$bin" "$@"
