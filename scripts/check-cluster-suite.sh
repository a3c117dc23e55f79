#!/usr/bin/env bash
# The cluster suite (tests/cluster_cases.ipp, doctest suite `cluster`) on a
# private replicated rig: builds the test binary if needed, starts
# ZooKeeper and 3 ClickHouse replicas (scripts/clickhouse-cluster.sh, a short
# ZooKeeper session timeout so a killed replica is counted dead in seconds),
# runs the suite, requires its summary line
#   cluster: replicas=N processes=P acked=A acked_lost=0 overlaps=0 failovers=F
# with N >= 2, P >= 4, A >= 200, F >= 1, and stops the rig.
# Usage: scripts/check-cluster-suite.sh [doctest options...]
# scripts/test.sh runs it on full runs. Ends with
#   cluster-tests: N passed, M failed
# (at least 15 cases must pass and none fail).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

bash scripts/build.sh chstate_tests
dir=$(mktemp -d /tmp/chstate-cluster.XXXXXX)
cleanup() { bash scripts/clickhouse-cluster.sh stop "$dir" >/dev/null 2>&1 || true; rm -rf "$dir"; }
trap cleanup EXIT
CHSTATE_CLUSTER_ZK_SESSION_TIMEOUT_MS=6000 bash scripts/clickhouse-cluster.sh start "$dir" 3
export CHSTATE_TEST_CLUSTER_DIR=$dir
log=$dir/suite.log
status=0
./build/tests/chstate_tests -ts=cluster "$@" 2>&1 | tee "$log" || status=$?
if [[ $# -eq 0 ]]; then
  line=$(grep -E '^cluster: replicas=' "$log" | tail -n 1 || true)
  if [[ $line =~ ^cluster:\ replicas=([0-9]+)\ processes=([0-9]+)\ acked=([0-9]+)\ acked_lost=([0-9]+)\ overlaps=([0-9]+)\ failovers=([0-9]+)$ ]]; then
    ((BASH_REMATCH[1] >= 2 && BASH_REMATCH[2] >= 4 && BASH_REMATCH[3] >= 200 && BASH_REMATCH[4] == 0 &&
      BASH_REMATCH[5] == 0 && BASH_REMATCH[6] >= 1)) \
      || { echo "cluster: want replicas>=2 processes>=4 acked>=200 acked_lost=0 overlaps=0 failovers>=1: $line" >&2; status=1; }
  else
    echo "cluster: no summary line (the cluster stress case did not run)" >&2; status=1
  fi
fi
summary=$(grep -E '^\[doctest\] test cases:' "$log" | tail -n 1 || true)
if [[ $summary =~ ([0-9]+)\ passed\ \|\ ([0-9]+)\ failed ]]; then
  echo "cluster-tests: ${BASH_REMATCH[1]} passed, ${BASH_REMATCH[2]} failed"
  if [[ $# -eq 0 ]] && ((BASH_REMATCH[1] < 15 || BASH_REMATCH[2] > 0)); then
    echo "cluster-tests: want at least 15 cases passed and none failed" >&2; status=1
  fi
else
  echo "cluster-tests: no doctest summary (the test binary did not finish)" >&2; status=1
fi
exit "$status"
