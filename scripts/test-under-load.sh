#!/usr/bin/env bash
# The README's test command on an oversubscribed machine: runs
# `bash scripts/test.sh` (or `scripts/test.sh ARGS…`, e.g. --quick) beside
# CPU-burning processes at the same priority, at least 3 per core, so every
# test's timing margin is tried on a machine as busy as a shared CI host or a
# developer's compiling laptop. A test that fails here asserts a speed, not a
# behaviour. The burners stop with the run, however it ends.
#
# Last line:
#   test-under-load: burners=B cores=C result=passed|failed (exit S) load=MAX wall=Ns
# (load: the highest 1-minute load average sampled during the run).
# Usage: scripts/test-under-load.sh [--per-core N] [test.sh arguments...]
#        (N: burners per core, at least 3; default 3)
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

per_core=3
if [[ ${1:-} == --per-core ]]; then
  per_core=${2:?--per-core needs a count}; shift 2
fi
[[ $per_core =~ ^[0-9]+$ ]] && ((per_core >= 3)) \
  || { echo "test-under-load: --per-core must be a whole number of at least 3, not '$per_core'" >&2; exit 2; }
cores=$(nproc)
burners=$((per_core * cores))

pids=()
stop_burners() {
  ((${#pids[@]} == 0)) || kill "${pids[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
  pids=()
}
trap stop_burners EXIT
trap 'exit 130' INT TERM

# A burner: a shell loop that never sleeps (no I/O, no memory): pure CPU.
for ((i = 0; i < burners; ++i)); do
  bash -c 'while :; do :; done' &
  pids+=($!)
done
# The highest 1-minute load average, sampled every 10 s.
load_file=$(mktemp /tmp/chstate-load.XXXXXX)
(
  max=0
  while sleep 10; do
    read -r now _ </proc/loadavg
    max=$(awk -v a="$max" -v b="$now" 'BEGIN { print (b > a ? b : a) }')
    echo "$max" >"$load_file"
  done
) &
sampler=$!
pids+=("$sampler")
echo "test-under-load: $burners burners started ($per_core per core on $cores cores); running scripts/test.sh $*"

start=$SECONDS
status=0
bash scripts/test.sh "$@" || status=$?
wall=$((SECONDS - start))
max_load=$(cat "$load_file" 2>/dev/null || true)
rm -f "$load_file"
stop_burners
result=passed
((status == 0)) || result=failed
echo "test-under-load: burners=$burners cores=$cores result=$result (exit $status) load=${max_load:-n/a} wall=${wall}s"
exit "$status"
