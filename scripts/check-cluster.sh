#!/usr/bin/env bash
# Self-test of scripts/clickhouse-cluster.sh against the real thing: starts a
# 2-replica ClickHouse 18.16 cluster with ZooKeeper in a temporary folder,
# checks replication, quorum, deduplication and faults over HTTP (curl), and
# stops it again. Run by hand; not part of scripts/test.sh.
#
# Usage: scripts/check-cluster.sh [--keep]   (--keep: leave the cluster running
#        and print its folder, for poking at it afterwards)
# Prints one line per check ("ok"/"FAIL", name, milliseconds, detail) and
# exits 1 if any check failed, 0 otherwise.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
CLUSTER_SH=$here/clickhouse-cluster.sh
keep=0
[[ ${1:-} == --keep ]] && keep=1

DIR=$(mktemp -d /tmp/chstate-cluster-check.XXXXXX)
cleanup() {
  if ((keep)); then
    echo "cluster left running in $DIR (stop: bash $CLUSTER_SH stop $DIR)"
  else
    bash "$CLUSTER_SH" stop "$DIR" >/dev/null 2>&1 || true
    rm -rf "$DIR"
  fi
}
trap cleanup EXIT

now_ms() { local t; t=$(date +%s%N); echo $((t / 1000000)); }
failures=0
T0=0
begin() { T0=$(now_ms); }
ok() { printf 'ok    %-52s %6d ms  %s\n' "$1" $(($(now_ms) - T0)) "${2:-}"; }
fail() { printf 'FAIL  %-52s %6d ms  %s\n' "$1" $(($(now_ms) - T0)) "${2:-}"; failures=$((failures + 1)); }

# q I SQL [URL-PARAMS]: run SQL on replica I over HTTP. Sets OUT (the body,
# trailing newline dropped), STATUS (HTTP status, 000 = no connection) and
# CODE (the server's "Code: N" or ""). Returns 0 on HTTP 200.
OUT= STATUS= CODE=
q() {
  local i=$1 sql=$2 params=${3:-} port var body
  var=CHSTATE_TEST_CLUSTER_R${i}_HTTP_PORT
  port=${!var}
  body=$(mktemp)
  STATUS=$(printf 'user = "%s:%s"\n' "$CHSTATE_TEST_CLUSTER_USER" "$(<"$CHSTATE_TEST_CLUSTER_PASSWORD_FILE")" \
    | curl -s --max-time "${QTIMEOUT:-30}" -K - -o "$body" -w '%{http_code}' \
        --data-binary "$sql" "http://127.0.0.1:$port/?$params" || true)
  OUT=$(<"$body")
  rm -f "$body"
  CODE=
  if [[ $OUT =~ Code:\ ([0-9]+) ]]; then CODE=${BASH_REMATCH[1]}; fi
  [[ $STATUS == 200 ]]
}
first_line() { printf '%s' "${OUT%%$'\n'*}" | cut -c1-160; }

# until_ok SECONDS CMD…: run CMD every 0.2 s until it succeeds; 1 on timeout.
until_ok() {
  local deadline=$(($(now_ms) + $1 * 1000))
  shift
  while ! "$@"; do
    (($(now_ms) < deadline)) || return 1
    sleep 0.2
  done
}

SEQ=select_sequential_consistency=1
Q2=insert_quorum=2

# --- start ------------------------------------------------------------------
begin
if out=$(bash "$CLUSTER_SH" start "$DIR" 2 2>&1); then
  ok "start: ZooKeeper + 2 replicas answer" "$(tail -n1 <<<"$out" | sed 's/.*, \([0-9]* ms\)$/start took \1/')"
else
  fail "start: ZooKeeper + 2 replicas answer" "$out"
  exit 1
fi
# shellcheck disable=SC1091
source "$DIR/env"

begin
if bash "$CLUSTER_SH" status "$DIR" >/dev/null && [[ $CHSTATE_TEST_CLUSTER_HTTP_ENDPOINTS == 127.0.0.1:*,127.0.0.1:* ]]; then
  ok "status and env" "endpoints $CHSTATE_TEST_CLUSTER_HTTP_ENDPOINTS, zk $CHSTATE_TEST_CLUSTER_ZK_PORT"
else
  fail "status and env" "$(bash "$CLUSTER_SH" status "$DIR" 2>&1 | tr '\n' ';')"
fi

# --- DDL on cluster -----------------------------------------------------------
C=$CHSTATE_TEST_CLUSTER_NAME
begin
if q 1 "CREATE DATABASE chk ON CLUSTER $C" \
   && q 1 "SELECT count() FROM system.databases WHERE name = 'chk'" && [[ $OUT == 1 ]] \
   && q 2 "SELECT count() FROM system.databases WHERE name = 'chk'" && [[ $OUT == 1 ]]; then
  ok "CREATE DATABASE ON CLUSTER (on both replicas)"
else
  fail "CREATE DATABASE ON CLUSTER (on both replicas)" "HTTP $STATUS: $(first_line)"
fi

DDL="CREATE TABLE chk.state ON CLUSTER $C (state_id String, value String, updated_at UInt64)
  ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/chk/state', '{replica}', updated_at)
  ORDER BY state_id"
begin
if q 1 "$DDL" \
   && q 1 "SELECT engine FROM system.tables WHERE database = 'chk' AND name = 'state'" && [[ $OUT == ReplicatedReplacingMergeTree ]] \
   && q 2 "SELECT engine FROM system.tables WHERE database = 'chk' AND name = 'state'" && [[ $OUT == ReplicatedReplacingMergeTree ]]; then
  ok "CREATE TABLE ON CLUSTER ReplicatedReplacingMergeTree"
else
  fail "CREATE TABLE ON CLUSTER ReplicatedReplacingMergeTree" "HTTP $STATUS: $(first_line)"
fi

# --- quorum write, sequential read, deduplication ----------------------------
begin
if q 1 "INSERT INTO chk.state VALUES ('s1', 'v1', 1)" "$Q2" \
   && q 2 "SELECT value FROM chk.state FINAL WHERE state_id = 's1'" "$SEQ" && [[ $OUT == v1 ]]; then
  ok "insert_quorum=2 on r1, read on r2 (sequential)"
else
  fail "insert_quorum=2 on r1, read on r2 (sequential)" "HTTP $STATUS: $(first_line)"
fi

begin
if q 2 "INSERT INTO chk.state VALUES ('s1', 'v1', 1)" "$Q2" \
   && q 2 "SELECT count() FROM chk.state" "$SEQ" && [[ $OUT == 1 ]] \
   && q 1 "SELECT count() FROM chk.state" "$SEQ" && [[ $OUT == 1 ]]; then
  ok "identical block on r2 deduplicated (count stays 1)"
else
  fail "identical block on r2 deduplicated (count stays 1)" "HTTP $STATUS: $(first_line) (expected 1)"
fi

# --- a replica killed ---------------------------------------------------------
begin
bash "$CLUSTER_SH" kill "$DIR" 2 >/dev/null
if ! q 2 "SELECT 1" && [[ $STATUS == 000 ]]; then
  ok "kill r2: r2 refuses connections"
else
  fail "kill r2: r2 refuses connections" "HTTP $STATUS"
fi

# r2's ZooKeeper session is still alive (30 s): r1 counts it as active and
# waits for it, until insert_quorum_timeout.
begin
if ! q 1 "INSERT INTO chk.state VALUES ('s2', 'lost?', 2)" "$Q2&insert_quorum_timeout=2000" && [[ $CODE == 319 ]]; then
  ok "quorum unreachable (r2 dead): typed error" "Code $CODE: $(first_line | cut -c1-90)"
else
  fail "quorum unreachable (r2 dead): typed error" "HTTP $STATUS code ${CODE:-none}: $(first_line)"
fi

begin
if ! q 1 "INSERT INTO chk.state VALUES ('s3', 'v3', 3)" "$Q2&insert_quorum_timeout=2000" && [[ $CODE == 286 ]]; then
  ok "next quorum insert while the first is pending" "Code $CODE: $(first_line | cut -c1-90)"
else
  fail "next quorum insert while the first is pending" "HTTP $STATUS code ${CODE:-none}: $(first_line)"
fi

begin
if q 1 "SELECT count() FROM chk.state WHERE state_id = 's2'" "$SEQ" && [[ $OUT == 0 ]] \
   && q 1 "SELECT count() FROM chk.state WHERE state_id = 's2'" && [[ $OUT == 1 ]]; then
  ok "unconfirmed row: hidden from sequential read on r1" "(a plain read on r1 sees it)"
else
  fail "unconfirmed row: hidden from sequential read on r1" "HTTP $STATUS: $(first_line)"
fi

begin
if q 1 "INSERT INTO chk.state VALUES ('s4', 'v4', 4)" "insert_quorum=0"; then
  ok "insert without quorum on r1 while r2 is dead"
else
  fail "insert without quorum on r1 while r2 is dead" "HTTP $STATUS: $(first_line)"
fi

begin
bash "$CLUSTER_SH" restart "$DIR" 2 >/dev/null
t_restart=$(($(now_ms) - T0))
caught_up() { q 2 "SELECT groupArray(state_id) FROM (SELECT state_id FROM chk.state FINAL ORDER BY state_id)" && [[ $OUT == "['s1','s2','s4']" ]]; }
if until_ok 60 caught_up; then
  ok "restart r2: catches up (s1, s2, s4)" "restart ${t_restart} ms, then caught up"
else
  fail "restart r2: catches up (s1, s2, s4)" "HTTP $STATUS: $(first_line)"
fi

# r2 fetched s2, so the pending quorum of the insert that failed with 319 is
# now satisfied: that write becomes visible to sequential reads.
begin
seq_sees_s2() { q 2 "SELECT count() FROM chk.state WHERE state_id = 's2'" "$SEQ" && [[ $OUT == 1 ]]; }
if until_ok 60 seq_sees_s2; then
  ok "the 319 write becomes visible once r2 is back" "(sequential read on r2 returns s2)"
else
  fail "the 319 write becomes visible once r2 is back" "HTTP $STATUS: $(first_line)"
fi

begin
if q 1 "INSERT INTO chk.state VALUES ('s5', 'v5', 5)" "$Q2" \
   && q 2 "SELECT count() FROM chk.state WHERE state_id = 's5'" "$SEQ" && [[ $OUT == 1 ]]; then
  ok "quorum inserts work again after r2's return"
else
  fail "quorum inserts work again after r2's return" "HTTP $STATUS code ${CODE:-none}: $(first_line)"
fi

# --- ZooKeeper down -------------------------------------------------------------
begin
bash "$CLUSTER_SH" zk-stop "$DIR" >/dev/null
if ! q 1 "INSERT INTO chk.state VALUES ('s6', 'v6', 6)" "$Q2" && [[ -n $CODE ]]; then
  ok "ZooKeeper stopped: INSERT fails with a typed error" "Code $CODE: $(first_line | cut -c1-90)"
else
  fail "ZooKeeper stopped: INSERT fails with a typed error" "HTTP $STATUS code ${CODE:-none}: $(first_line)"
fi
zk_insert_code=$CODE

begin
if q 1 "SELECT count() FROM chk.state FINAL" && [[ $OUT == 4 ]] \
   && q 2 "SELECT count() FROM chk.state FINAL" && [[ $OUT == 4 ]]; then
  ok "ZooKeeper stopped: plain SELECT still answers (4 rows)"
else
  fail "ZooKeeper stopped: plain SELECT still answers (4 rows)" "HTTP $STATUS: $(first_line)"
fi

begin
if ! q 2 "SELECT count() FROM chk.state" "$SEQ"; then
  ok "ZooKeeper stopped: sequential SELECT fails (typed)" "Code ${CODE:-none}: $(first_line | cut -c1-90)"
else
  fail "ZooKeeper stopped: sequential SELECT fails (typed)" "answered $(first_line)"
fi

begin
zk_out=$(bash "$CLUSTER_SH" zk-start "$DIR")
t_zk=$(($(now_ms) - T0))
insert_works() { q 1 "INSERT INTO chk.state VALUES ('s6', 'v6', 6)" "$Q2"; }
if until_ok 90 insert_works; then
  ok "ZooKeeper restarted: quorum INSERT works again" "zk answered after ${t_zk} ms; insert ok after $(($(now_ms) - T0)) ms"
else
  fail "ZooKeeper restarted: quorum INSERT works again" "$zk_out; last: HTTP $STATUS code ${CODE:-none}: $(first_line)"
fi

begin
if q 2 "SELECT count() FROM chk.state FINAL" "$SEQ" && [[ $OUT == 5 ]]; then
  ok "after recovery: sequential read on r2 sees 5 rows"
else
  fail "after recovery: sequential read on r2 sees 5 rows" "HTTP $STATUS: $(first_line)"
fi

# --- pause / resume -----------------------------------------------------------
begin
bash "$CLUSTER_SH" pause "$DIR" 1 >/dev/null
QTIMEOUT=1 q 1 "SELECT 1" || true
st_paused=$STATUS
paused_status=$(bash "$CLUSTER_SH" status "$DIR" | grep '^r1' || true)
bash "$CLUSTER_SH" resume "$DIR" 1 >/dev/null
if [[ $st_paused == 000 && $paused_status == *paused* ]] && q 1 "SELECT 1"; then
  ok "pause r1: no answer (status: paused); resume: answers"
else
  fail "pause r1: no answer (status: paused); resume: answers" "paused: HTTP $st_paused, '$paused_status'; after resume HTTP $STATUS"
fi

# --- stop -------------------------------------------------------------------------
begin
if ((keep)); then
  ok "stop: skipped (--keep)"
elif bash "$CLUSTER_SH" stop "$DIR" >/dev/null && ! bash "$CLUSTER_SH" status "$DIR" >/dev/null \
   && bash "$CLUSTER_SH" stop "$DIR" >/dev/null; then
  ok "stop (twice: idempotent); status reports down"
else
  fail "stop (twice: idempotent); status reports down"
fi

echo "zookeeper-down insert code: ${zk_insert_code:-none}"
if ((failures)); then
  echo "check-cluster: $failures check(s) FAILED"
  exit 1
fi
echo "check-cluster: all checks passed"
