#!/usr/bin/env bash
# The cluster suite (tests/cluster_cases.ipp, doctest suite `cluster`) on a
# private replicated rig: builds the test binary if needed, starts
# ZooKeeper and 3 ClickHouse replicas (scripts/clickhouse-cluster.sh, a short
# ZooKeeper session timeout so a killed replica is counted dead in seconds),
# runs the suite and stops the rig. Its stress case prints
#   cluster: replicas=N processes=P acked=A acked_lost=0 overlaps=0 failovers=F
# and checks those counts itself (the verdicts are the test binary's: this
# script goes by its exit code). Ends with
#   cluster-tests: N passed, M failed
# Usage: scripts/check-cluster-suite.sh [--no-build] [doctest options...]
# (--no-build: the test binary is built already; scripts/test.sh, which runs
# it on full runs, built it in its first stage.)
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

if [[ ${1:-} == --no-build ]]; then
  shift
  [[ -x build/tests/chstate_tests ]] || { echo "check-cluster-suite: --no-build, but build/tests/chstate_tests is not built" >&2; exit 1; }
else
  bash scripts/build.sh chstate_tests
fi
dir=$(mktemp -d /tmp/chstate-cluster.XXXXXX)
status=0
# On a failure, before the rig and its logs are removed: which replicas were
# still running, and the end of each one's error log and of ZooKeeper's (CI
# keeps only this output; a stress run once ended with two replicas gone and
# nothing to say why).
rig_report() {
  local r pid
  echo "check-cluster-suite: the rig at the failure (logs are removed with it):" >&2
  for r in "$dir"/r*/; do
    r=${r%/}
    pid=$(cat "$r"/*.pid 2>/dev/null | head -n 1 || true)
    if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
      echo "  ${r##*/}: running (pid $pid)" >&2
    else
      echo "  ${r##*/}: not running (pid ${pid:-unknown})" >&2
    fi
    echo "  ---- ${r##*/}: last error-log lines" >&2
    grep -v -E '^\s*$' "$r/log/clickhouse-server.err.log" 2>/dev/null | grep -E '<(Error|Fatal)>|Received signal|Terminate|Killed|std::bad_alloc|Segmentation' |
      tail -n 12 | cut -c1-400 | sed 's/^/    /' >&2 || true
  done
  echo "  ---- zookeeper: last lines" >&2
  tail -n 8 "$dir/zk/zookeeper.log" 2>/dev/null | cut -c1-300 | sed 's/^/    /' >&2 || true
  # The kernel's word, where this user may read it (an OOM kill says so).
  dmesg 2>/dev/null | grep -i -E 'killed process|out of memory' | tail -n 5 | sed 's/^/  kernel: /' >&2 || true
}
cleanup() {
  ((status == 0)) || rig_report
  bash scripts/clickhouse-cluster.sh stop "$dir" >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT
CHSTATE_CLUSTER_ZK_SESSION_TIMEOUT_MS=6000 bash scripts/clickhouse-cluster.sh start "$dir" 3
export CHSTATE_TEST_CLUSTER_DIR=$dir
log=$dir/suite.log
./build/tests/chstate_tests -ts=cluster "$@" 2>&1 | tee "$log" || status=$?
summary=$(grep -E '^\[doctest\] test cases:' "$log" | tail -n 1 || true)
if [[ $summary =~ ([0-9]+)\ passed\ \|\ ([0-9]+)\ failed ]]; then
  echo "cluster-tests: ${BASH_REMATCH[1]} passed, ${BASH_REMATCH[2]} failed"
else
  echo "cluster-tests: no doctest summary (the test binary did not finish)" >&2; status=1
fi
exit "$status"
