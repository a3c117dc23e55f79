#!/usr/bin/env bash
# The README's second command, and what CI runs: installs what is missing,
# fetches chDB, starts a private ClickHouse server, builds everything and runs
# every test. Ends with doctest's summary; exits non-zero on any failure.
# Usage: scripts/test.sh [doctest options...]
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

bash scripts/build.sh

server_dir=$(mktemp -d /tmp/chstate-server.XXXXXX)
stop_server() { bash scripts/clickhouse-server.sh stop "$server_dir" >/dev/null 2>&1 || true; rm -rf "$server_dir"; }
trap stop_server EXIT
bash scripts/clickhouse-server.sh start "$server_dir"
export CHSTATE_TEST_SERVER_DIR=$server_dir

test_dir=$(mktemp -d /tmp/chstate-tests.XXXXXX)
export CHSTATE_TEST_DIR=$test_dir
status=0
./build/tests/chstate_tests "$@" || status=$?
rm -rf "$test_dir"
exit "$status"
