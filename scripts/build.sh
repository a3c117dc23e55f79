#!/usr/bin/env bash
# Installs what is missing, fetches the embedded engine, and builds the given
# CMake targets (all when none are given) into build/.
# Usage: scripts/build.sh [TARGET...]
# Two builds of build/ never overlap: a second waits for the first (a lock
# in build/; scripts/test.sh builds the benchmarks and examples in the
# background while its stages run).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

mkdir -p build
exec 9>build/.build.lock
flock 9

bash scripts/install-deps.sh
bash scripts/fetch-chdb.sh >/dev/null

if [[ ! -f build/build.ninja ]]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
# Two cores: two compile jobs keep memory and the machine responsive.
ninja -C build -j "${CHSTATE_BUILD_JOBS:-2}" "$@"
