#!/usr/bin/env bash
# The README's first command: builds and runs the main example on the
# embedded engine. Run it twice: the second run resumes from the bookmark.
# Usage: scripts/run-example.sh [example arguments...]
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
bash scripts/build.sh 01_resumable_pipeline >/dev/null
exec ./build/examples/01_resumable_pipeline "$@"
