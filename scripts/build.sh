#!/usr/bin/env bash
# Installs what is missing, fetches the embedded engine, and builds the given
# CMake targets (all when none are given) into build/.
# Usage: scripts/build.sh [TARGET...]
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

bash scripts/install-deps.sh
bash scripts/fetch-chdb.sh >/dev/null

if [[ ! -f build/build.ninja ]]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
# Two cores: two compile jobs keep memory and the machine responsive.
ninja -C build -j "${CHSTATE_BUILD_JOBS:-2}" "$@"
