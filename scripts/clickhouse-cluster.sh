#!/usr/bin/env bash
# A private replicated ClickHouse 18.16 cluster on loopback, for tests:
# one standalone ZooKeeper and N replicas of one shard, all kept in DIR.
#
# Usage: scripts/clickhouse-cluster.sh CMD DIR [ARG]
#   start DIR [N]   install what is missing (zookeeper, default-jre-headless;
#                   clickhouse-server through scripts/install-deps.sh), start
#                   ZooKeeper and N replicas (N = 2 or 3; default 2, or the N
#                   DIR was made with), wait until ZooKeeper answers `ruok`,
#                   every replica answers over HTTP, sees ZooKeeper and lists
#                   all N replicas in cluster chstate_cluster; write DIR/env.
#                   Whatever already runs is left alone (so `start` also
#                   brings back what was killed or stopped); a DIR keeps its
#                   data, password and (if still free) ports.
#   stop DIR        stop every replica (SIGCONT first, in case one is paused)
#                   and ZooKeeper; fine if nothing runs or DIR is missing.
#   kill DIR I      SIGKILL replica I (1..N): a crash; `restart DIR I` (or
#                   `start DIR`) brings it back on the same ports.
#   restart DIR I   stop replica I (TERM) and start it again on its ports.
#   pause DIR I     SIGSTOP replica I: connections stay open, nothing answers.
#   resume DIR I    SIGCONT replica I.
#   zk-stop DIR     stop ZooKeeper (TERM, KILL after 10 s).
#   zk-kill DIR     SIGKILL ZooKeeper.
#   zk-start DIR    start ZooKeeper again on its port (the replicas' config
#                   names it) and wait until it answers `ruok`.
#   status DIR      one line per component; exit 0 if all run and answer.
#   env DIR         print DIR/env (shell exports; never the password itself).
#
# DIR/env (sourced by tests):
#   CHSTATE_TEST_CLUSTER_NAME            chstate_cluster (remote_servers name)
#   CHSTATE_TEST_CLUSTER_HTTP_ENDPOINTS  127.0.0.1:P1,127.0.0.1:P2[,…] (HTTP)
#   CHSTATE_TEST_CLUSTER_USER            chstate
#   CHSTATE_TEST_CLUSTER_PASSWORD_FILE   DIR/password (same on every replica)
#   CHSTATE_TEST_CLUSTER_ZK_PORT         ZooKeeper's client port (127.0.0.1)
#   CHSTATE_TEST_CLUSTER_REPLICAS        N
#   CHSTATE_TEST_CLUSTER_SHARD           01 (the {shard} macro)
#   CHSTATE_TEST_CLUSTER_DIR             DIR
#   CHSTATE_TEST_CLUSTER_R<i>_HTTP_PORT, _TCP_PORT, _INTERSERVER_PORT,
#   _HTTPS_PORT, _CA_FILE (the replica's own test CA, for localhost:HTTPS),
#   _NAME (the {replica} macro, r<i>), _DIR (DIR/r<i>)   for i = 1..N
#
# Files: DIR/ports (saved ports), DIR/password (0600), DIR/env,
#   DIR/zk/{zoo.cfg,data/,zookeeper.log}, DIR/r<i>/ = a scripts/clickhouse-server.sh
#   folder with DIR/r<i>/config.d/cluster.xml (zookeeper, macros,
#   interserver_http_host, remote_servers, distributed_ddl; 0600: it holds
#   the password for the cluster's inter-replica queries).
#
# Ports: 4 per replica (clickhouse-server.sh's http, tcp, interserver, https)
# and 1 for ZooKeeper, chosen free in 20000-31999 when nothing runs. A port
# taken between that choice and the bind is noticed (the server or ZooKeeper
# logs "Address already in use"): with nothing else running the script picks
# new ports and tries again (5 times); when something already runs on the
# saved ports (restart, zk-start, start of a partly running cluster) it
# cannot move and reports it.
#
# Exit codes: 0 done; 1 error (the message shows the relevant log tail);
#   2 usage; 3 a port was taken (after the retries, or a saved port that
#   cannot move).
#
# Environment: CHSTATE_CLUSTER_START_TIMEOUT (s, default 120) bounds each
#   wait; CHSTATE_CLUSTER_ZK_SESSION_TIMEOUT_MS (default 30000, ClickHouse's
#   own default) is written into the replicas' zookeeper section at start
#   and kept in DIR: a later restart uses it unless the variable is set again.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
SERVER_SH=$here/clickhouse-server.sh
INSTALL_DEPS=$here/install-deps.sh
CLUSTER_NAME=chstate_cluster
SHARD=01
USER_NAME=chstate          # the user clickhouse-server.sh creates
TIMEOUT=${CHSTATE_CLUSTER_START_TIMEOUT:-120}
ZK_SESSION_TIMEOUT_MS=${CHSTATE_CLUSTER_ZK_SESSION_TIMEOUT_MS:-30000}
ZK_STOP_TIMEOUT=10
EXIT_PORT_TAKEN=3

me=clickhouse-cluster.sh
die() { echo "$me: error: $*" >&2; exit 1; }
die_port() { echo "$me: error: $*" >&2; exit "$EXIT_PORT_TAKEN"; }
usage() {
  echo "usage: $me start DIR [N] | stop|status|env|zk-stop|zk-kill|zk-start DIR | kill|restart|pause|resume DIR I" >&2
  exit 2
}

(($# >= 2)) || usage
cmd=$1
case $cmd in
  start) (($# <= 3)) || usage ;;
  stop|status|env|zk-stop|zk-kill|zk-start) (($# == 2)) || usage ;;
  kill|restart|pause|resume) (($# == 3)) || usage ;;
  *) usage ;;
esac
[[ -n $2 ]] || usage
[[ $2 =~ ^[A-Za-z0-9._/+@:-]+$ ]] \
  || die "DIR '$2' may only contain letters, digits and . _ / + @ : -"

if [[ $cmd != start ]]; then
  if [[ ! -d $2 ]]; then
    [[ $cmd == stop ]] && { echo "$me: $2 does not exist; nothing to stop"; exit 0; }
    die "$2 does not exist (run: $me start $2)"
  fi
fi
mkdir -p "$2"
DIR=$(cd "$2" && pwd -P)
PORTSFILE=$DIR/ports
PWFILE=$DIR/password
ENVFILE=$DIR/env
ZKDIR=$DIR/zk

now_ms() { local t; t=$(date +%s%N); echo $((t / 1000000)); }

# tail_log FILE [N]: the last lines of a log, framed, on stderr.
tail_log() {
  [[ -s $1 ]] || { echo "---- $1: empty or missing ----" >&2; return 0; }
  echo "---- tail of $1 ----" >&2
  tail -n "${2:-25}" "$1" >&2
}

# --- saved layout -----------------------------------------------------------

N=
ZK_PORT=
declare -a HTTP_PORT=() TCP_PORT=() INTERSERVER_PORT=() HTTPS_PORT=()

load_ports() {
  [[ -s $PORTSFILE ]] || return 1
  local k v i
  while IFS='=' read -r k v; do
    [[ $v =~ ^[0-9]+$ ]] || continue
    case $k in
      N) N=$v ;;
      ZK_PORT) ZK_PORT=$v ;;
      # the value given at start, unless the environment names one now
      ZK_SESSION_TIMEOUT_MS) [[ -n ${CHSTATE_CLUSTER_ZK_SESSION_TIMEOUT_MS:-} ]] || ZK_SESSION_TIMEOUT_MS=$v ;;
      R*_HTTP_PORT) i=${k#R}; i=${i%_HTTP_PORT}; HTTP_PORT[i]=$v ;;
      R*_TCP_PORT) i=${k#R}; i=${i%_TCP_PORT}; TCP_PORT[i]=$v ;;
      R*_INTERSERVER_PORT) i=${k#R}; i=${i%_INTERSERVER_PORT}; INTERSERVER_PORT[i]=$v ;;
      R*_HTTPS_PORT) i=${k#R}; i=${i%_HTTPS_PORT}; HTTPS_PORT[i]=$v ;;
    esac
  done <"$PORTSFILE"
  [[ -n $N && -n $ZK_PORT ]] || return 1
  for ((i = 1; i <= N; i++)); do
    [[ -n ${HTTP_PORT[i]:-} && -n ${TCP_PORT[i]:-} && -n ${INTERSERVER_PORT[i]:-} && -n ${HTTPS_PORT[i]:-} ]] || return 1
  done
}

save_ports() {
  local i
  {
    echo "N=$N"
    echo "ZK_PORT=$ZK_PORT"
    echo "ZK_SESSION_TIMEOUT_MS=$ZK_SESSION_TIMEOUT_MS"
    for ((i = 1; i <= N; i++)); do
      echo "R${i}_HTTP_PORT=${HTTP_PORT[i]}"
      echo "R${i}_TCP_PORT=${TCP_PORT[i]}"
      echo "R${i}_INTERSERVER_PORT=${INTERSERVER_PORT[i]}"
      echo "R${i}_HTTPS_PORT=${HTTPS_PORT[i]}"
    done
  } >"$PORTSFILE.tmp"
  mv -f "$PORTSFILE.tmp" "$PORTSFILE"
}

need_layout() { load_ports || die "$PORTSFILE missing or incomplete (run: $me start $DIR)"; }

replica_index() {
  [[ $1 =~ ^[1-9][0-9]*$ ]] && (($1 <= N)) || die "replica '$1' is not one of 1..$N"
}

rdir() { echo "$DIR/r$1"; }

# --- ports ------------------------------------------------------------------

# used_ports, port_is_free (shared with clickhouse-server.sh)
source "$(dirname "${BASH_SOURCE[0]}")/ports.sh"

# pick_ports: 4*N + 1 distinct free ports (replicas, then ZooKeeper).
pick_ports() {
  local used p tries=0 want i
  local -a picked=()
  want=$((4 * N + 1))
  used=" $(used_ports | tr '\n' ' ') "
  while ((${#picked[@]} < want)); do
    ((++tries < 5000)) || die "could not find $want free ports in 20000-31999"
    p=$((20000 + (RANDOM * 32768 + RANDOM) % 12000))
    [[ $used == *" $p "* ]] && continue
    [[ " ${picked[*]} " == *" $p "* ]] && continue
    picked+=("$p")
  done
  ZK_PORT=${picked[4 * N]}
  for ((i = 1; i <= N; i++)); do
    HTTP_PORT[i]=${picked[4 * i - 4]} TCP_PORT[i]=${picked[4 * i - 3]}
    INTERSERVER_PORT[i]=${picked[4 * i - 2]} HTTPS_PORT[i]=${picked[4 * i - 1]}
  done
}

all_ports_free() {
  local i p
  for ((i = 1; i <= N; i++)); do
    for p in "${HTTP_PORT[i]}" "${TCP_PORT[i]}" "${INTERSERVER_PORT[i]}" "${HTTPS_PORT[i]}"; do
      port_is_free "$p" || return 1
    done
  done
  port_is_free "$ZK_PORT"
}

# --- packages ---------------------------------------------------------------

pkg_installed() { [[ $(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true) == "install ok installed" ]]; }

ensure_packages() {
  local -a missing=() SUDO=()
  local log p
  if ! pkg_installed clickhouse-server || [[ ! -x /usr/sbin/clickhouse-server ]]; then
    echo "$me: clickhouse-server is missing: running scripts/install-deps.sh" >&2
    bash "$INSTALL_DEPS" >&2 || die "scripts/install-deps.sh failed"
  fi
  for p in zookeeper default-jre-headless; do
    pkg_installed "$p" || missing+=("$p")
  done
  ((${#missing[@]} == 0)) && return 0
  if ((EUID != 0)); then
    command -v sudo >/dev/null 2>&1 || die "not root and sudo not found; missing: ${missing[*]}"
    SUDO=(sudo)
  fi
  log=$(mktemp /tmp/clickhouse-cluster-apt.XXXXXX.log)
  echo "$me: installing ${missing[*]} (apt-get install --no-install-recommends)" >&2
  if ! "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
       apt-get install -y --no-install-recommends "${missing[@]}" >"$log" 2>&1; then
    # Perhaps stale package lists: refresh once and try again.
    "${SUDO[@]}" apt-get update >>"$log" 2>&1 || true
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
      apt-get install -y --no-install-recommends "${missing[@]}" >>"$log" 2>&1 \
      || { tail_log "$log" 30; die "apt-get install ${missing[*]} failed (log $log)"; }
  fi
  rm -f "$log"
}

# --- ZooKeeper --------------------------------------------------------------

# Our ZooKeeper's command line has exactly the argument DIR/zk/zoo.cfg (one
# NUL-separated word, matched whole). The pattern goes to grep through a file,
# so grep's own command line never matches.
zk_pids() {
  local f pid
  { grep -lsxzF -f <(printf '%s\n' "$ZKDIR/zoo.cfg") /proc/[0-9]*/cmdline || true; } | while read -r f; do
    pid=${f#/proc/}; pid=${pid%/cmdline}
    [[ $pid == "$BASHPID" ]] || echo "$pid"
  done
}

# zk_ask WORD: send a four-letter word to 127.0.0.1:ZK_PORT, print the answer.
zk_ask() {
  timeout 3 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1; printf %s "$2" >&3; cat <&3' _ "$ZK_PORT" "$1" 2>/dev/null
}

zk_classpath() {
  local cp=/usr/share/java/zookeeper.jar j
  [[ -r $cp ]] || die "$cp not found (is the zookeeper package installed?)"
  # zookeeper.jar's manifest names its dependencies; add an SLF4J binding
  # that writes to stderr (our log file) instead of SLF4J's no-op default.
  for j in /usr/share/java/slf4j-simple.jar; do
    [[ -r $j ]] && cp+=:$j
  done
  echo "$cp"
}

write_zoo_cfg() {
  mkdir -p "$ZKDIR/data"
  {
    echo "# written by scripts/clickhouse-cluster.sh"
    echo "tickTime=2000"
    echo "initLimit=10"
    echo "syncLimit=5"
    echo "dataDir=$ZKDIR/data"
    echo "clientPort=$ZK_PORT"
    echo "clientPortAddress=127.0.0.1"
    echo "maxClientCnxns=0"
    echo "admin.enableServer=false"
    echo "4lw.commands.whitelist=ruok,stat,srvr,mntr"
    echo "autopurge.purgeInterval=1"
    echo "autopurge.snapRetainCount=3"
  } >"$ZKDIR/zoo.cfg.tmp"
  mv -f "$ZKDIR/zoo.cfg.tmp" "$ZKDIR/zoo.cfg"
}

# zk_launch: 0 = answers `imok`, 1 = failed, 2 = its port was taken.
zk_launch() {
  local pid deadline log=$ZKDIR/zookeeper.log
  if [[ -n $(zk_pids) ]]; then
    [[ $(zk_ask ruok) == imok ]] && return 0
  else
    port_is_free "$ZK_PORT" || { echo "$me: ZooKeeper port $ZK_PORT is already in use" >&2; return 2; }
    write_zoo_cfg
    command -v java >/dev/null 2>&1 || die "java not found (default-jre-headless)"
    {
      echo "==== $(date -u +%FT%TZ) starting ZooKeeper on 127.0.0.1:$ZK_PORT ===="
    } >>"$log"
    # -Dzookeeper.jmx.log4j.disable: no log4j JMX probe; small heap: a test rig.
    setsid nohup java -Xms64m -Xmx256m -XX:+UseSerialGC \
      -Dorg.slf4j.simpleLogger.showDateTime=true \
      -Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd'T'HH:mm:ss.SSS \
      -Dzookeeper.jmx.log4j.disable=true \
      -cp "$(zk_classpath)" org.apache.zookeeper.server.ZooKeeperServerMain "$ZKDIR/zoo.cfg" \
      </dev/null >>"$log" 2>&1 9>&- &
    pid=$!
    disown "$pid"
    echo "$pid" >"$ZKDIR/zookeeper.pid"
  fi
  deadline=$(($(now_ms) + TIMEOUT * 1000))
  while (($(now_ms) < deadline)); do
    [[ $(zk_ask ruok) == imok ]] && return 0
    if [[ -z $(zk_pids) ]]; then
      rm -f "$ZKDIR/zookeeper.pid"
      if tail -n 200 "$log" | grep -q 'Address already in use'; then
        return 2
      fi
      echo "$me: ZooKeeper exited during startup" >&2
      tail_log "$log"
      return 1
    fi
    sleep 0.1
  done
  echo "$me: ZooKeeper did not answer 'ruok' on 127.0.0.1:$ZK_PORT within ${TIMEOUT}s" >&2
  tail_log "$log"
  zk_stop TERM >/dev/null || true
  return 1
}

# zk_stop TERM|KILL: 0 = stopped one, 1 = none ran.
zk_stop() {
  local sig=$1 deadline
  local -a pids
  mapfile -t pids < <(zk_pids)
  if ((${#pids[@]} == 0)); then
    rm -f "$ZKDIR/zookeeper.pid"
    return 1
  fi
  kill -CONT "${pids[@]}" 2>/dev/null || true
  kill -"$sig" "${pids[@]}" 2>/dev/null || true
  deadline=$(($(now_ms) + ZK_STOP_TIMEOUT * 1000))
  while [[ -n $(zk_pids) ]] && (($(now_ms) < deadline)); do sleep 0.05; done
  if [[ -n $(zk_pids) ]]; then
    echo "$me: ZooKeeper did not stop within ${ZK_STOP_TIMEOUT}s after $sig; sending KILL" >&2
    kill -KILL "${pids[@]}" 2>/dev/null || true
    deadline=$(($(now_ms) + 5000))
    while [[ -n $(zk_pids) ]] && (($(now_ms) < deadline)); do sleep 0.05; done
    [[ -z $(zk_pids) ]] || die "ZooKeeper pid(s) ${pids[*]} still alive after KILL"
  fi
  deadline=$(($(now_ms) + 5000))
  until exited "${pids[@]}"; do # its sockets closed too
    (($(now_ms) < deadline)) || die "ZooKeeper pid(s) ${pids[*]} have not finished exiting"
    sleep 0.05
  done
  rm -f "$ZKDIR/zookeeper.pid"
  return 0
}

# --- replicas ---------------------------------------------------------------

write_cluster_xml() {
  local i=$1 j d pw
  d=$(rdir "$i")
  pw=$(<"$PWFILE")
  mkdir -p "$d/config.d"
  (
    umask 077
    {
      echo '<?xml version="1.0"?>'
      echo '<!-- written by scripts/clickhouse-cluster.sh: replica '"r$i"' of '"$CLUSTER_NAME"' -->'
      echo '<yandex>'
      echo '    <zookeeper>'
      echo "        <node><host>127.0.0.1</host><port>$ZK_PORT</port></node>"
      echo "        <session_timeout_ms>$ZK_SESSION_TIMEOUT_MS</session_timeout_ms>"
      echo '    </zookeeper>'
      echo "    <macros><shard>$SHARD</shard><replica>r$i</replica></macros>"
      echo '    <interserver_http_host>127.0.0.1</interserver_http_host>'
      echo "    <interserver_http_port>${INTERSERVER_PORT[i]}</interserver_http_port>"
      echo '    <remote_servers>'
      echo "        <$CLUSTER_NAME>"
      echo '            <shard>'
      echo '                <internal_replication>true</internal_replication>'
      for ((j = 1; j <= N; j++)); do
        echo "                <replica><host>127.0.0.1</host><port>${TCP_PORT[j]}</port><user>$USER_NAME</user><password>$pw</password></replica>"
      done
      echo '            </shard>'
      echo "        </$CLUSTER_NAME>"
      echo '    </remote_servers>'
      echo '    <distributed_ddl><path>/clickhouse/task_queue/ddl</path></distributed_ddl>'
      echo '</yandex>'
    } >"$d/config.d/cluster.xml.tmp"
  )
  mv -f "$d/config.d/cluster.xml.tmp" "$d/config.d/cluster.xml"
}

# The same password on every replica (clickhouse-server.sh keeps an existing one).
prepare_replica() {
  local i=$1 d
  d=$(rdir "$i")
  mkdir -p "$d"
  if ! cmp -s "$PWFILE" "$d/password"; then
    (umask 077; cp "$PWFILE" "$d/password.tmp")
    mv -f "$d/password.tmp" "$d/password"
  fi
  write_cluster_xml "$i"
}

server_sh() {  # server_sh I CMD: clickhouse-server.sh CMD DIR/rI on I's saved ports
  local i=$1 c=$2
  CHSTATE_SERVER_PORTS="${HTTP_PORT[i]} ${TCP_PORT[i]} ${INTERSERVER_PORT[i]} ${HTTPS_PORT[i]}" \
  CHSTATE_SERVER_START_TIMEOUT=$TIMEOUT \
    bash "$SERVER_SH" "$c" "$(rdir "$i")"
}

# PIDs of replica I (clickhouse-server.sh's own test: its exact --config-file).
replica_pids() {
  local f pid
  { grep -lsxzF -f <(printf -- '--config-file=%s/config.xml\n' "$(rdir "$1")") /proc/[0-9]*/cmdline || true; } \
    | while read -r f; do pid=${f#/proc/}; pid=${pid%/cmdline}; [[ $pid == "$BASHPID" ]] || echo "$pid"; done
}

# ch I SQL: run SQL on replica I over HTTP; prints the answer; fails on an error.
ch() {
  local i=$1 sql=$2 pw
  pw=$(<"$PWFILE")
  printf 'user = "%s:%s"\n' "$USER_NAME" "$pw" \
    | curl -sS --fail-with-body --max-time 5 -K - --data-binary "$sql" "http://127.0.0.1:${HTTP_PORT[i]}/" 2>&1
}

# Wait until replica I sees ZooKeeper (a read of system.zookeeper works) and
# lists all N replicas of the cluster.
wait_replica_ready() {
  local i=$1 deadline out="" d
  d=$(rdir "$i")
  deadline=$(($(now_ms) + TIMEOUT * 1000))
  while (($(now_ms) < deadline)); do
    if out=$(ch "$i" "SELECT count() FROM system.zookeeper WHERE path = '/'") \
       && out=$(ch "$i" "SELECT count() FROM system.clusters WHERE cluster = '$CLUSTER_NAME'") \
       && [[ $out == "$N" ]]; then
      return 0
    fi
    sleep 0.2
  done
  echo "$me: replica r$i (http 127.0.0.1:${HTTP_PORT[i]}) did not see ZooKeeper 127.0.0.1:$ZK_PORT" \
       "and $N replicas of $CLUSTER_NAME within ${TIMEOUT}s; last answer: ${out:-none}" >&2
  tail_log "$d/log/clickhouse-server.err.log"
  tail_log "$ZKDIR/zookeeper.log" 10
  return 1
}

write_env() {
  local i eps=""
  for ((i = 1; i <= N; i++)); do eps+=${eps:+,}127.0.0.1:${HTTP_PORT[i]}; done
  {
    echo "export CHSTATE_TEST_CLUSTER_NAME=$CLUSTER_NAME"
    echo "export CHSTATE_TEST_CLUSTER_HTTP_ENDPOINTS=$eps"
    echo "export CHSTATE_TEST_CLUSTER_USER=$USER_NAME"
    echo "export CHSTATE_TEST_CLUSTER_PASSWORD_FILE=$PWFILE"
    echo "export CHSTATE_TEST_CLUSTER_ZK_PORT=$ZK_PORT"
    echo "export CHSTATE_TEST_CLUSTER_REPLICAS=$N"
    echo "export CHSTATE_TEST_CLUSTER_SHARD=$SHARD"
    echo "export CHSTATE_TEST_CLUSTER_DIR=$DIR"
    for ((i = 1; i <= N; i++)); do
      echo "export CHSTATE_TEST_CLUSTER_R${i}_NAME=r$i"
      echo "export CHSTATE_TEST_CLUSTER_R${i}_HTTP_PORT=${HTTP_PORT[i]}"
      echo "export CHSTATE_TEST_CLUSTER_R${i}_TCP_PORT=${TCP_PORT[i]}"
      echo "export CHSTATE_TEST_CLUSTER_R${i}_INTERSERVER_PORT=${INTERSERVER_PORT[i]}"
      echo "export CHSTATE_TEST_CLUSTER_R${i}_HTTPS_PORT=${HTTPS_PORT[i]}"
      echo "export CHSTATE_TEST_CLUSTER_R${i}_CA_FILE=$(rdir "$i")/tls/ca.pem"
      echo "export CHSTATE_TEST_CLUSTER_R${i}_DIR=$(rdir "$i")"
    done
  } >"$ENVFILE.tmp"
  mv -f "$ENVFILE.tmp" "$ENVFILE"
}

anything_running() {
  local i
  [[ -n $(zk_pids) ]] && return 0
  for ((i = 1; i <= N; i++)); do [[ -n $(replica_pids "$i") ]] && return 0; done
  return 1
}

# start_replicas: start every replica that is not running, in parallel.
# 0 = all answer; 1 = failed; 2 = a port was taken.
start_replicas() {
  local i rc=0 r
  local -a pids=()
  for ((i = 1; i <= N; i++)); do
    prepare_replica "$i"
    if [[ -n $(replica_pids "$i") ]]; then pids[i]=""; continue; fi
    server_sh "$i" start >"$(rdir "$i")/start.out" 2>&1 9>&- &
    pids[i]=$!
  done
  for ((i = 1; i <= N; i++)); do
    [[ -n ${pids[i]} ]] || continue
    r=0; wait "${pids[i]}" || r=$?
    if ((r != 0)); then
      sed 's/^/  r'"$i"': /' "$(rdir "$i")/start.out" >&2
      if ((r == EXIT_PORT_TAKEN)); then ((rc == 1)) || rc=2; else rc=1; fi
    fi
  done
  return "$rc"
}

stop_all() {
  local i any=0
  if load_ports; then
    for ((i = 1; i <= N; i++)); do
      if [[ -n $(replica_pids "$i") ]]; then
        kill -CONT $(replica_pids "$i") 2>/dev/null || true
        bash "$SERVER_SH" stop "$(rdir "$i")" >/dev/null 2>&1 &
        any=1
      fi
    done
    wait
    for ((i = 1; i <= N; i++)); do
      [[ -z $(replica_pids "$i") ]] || die "replica r$i still runs after stop"
    done
  fi
  zk_stop TERM && any=1
  return $((1 - any))
}

do_start() {
  local want=${1:-} t0 attempt rc i running=0
  t0=$(now_ms)
  if [[ -n $want ]]; then
    [[ $want =~ ^[23]$ ]] || die "N must be 2 or 3, not '$want'"
  fi
  ensure_packages
  if load_ports; then
    [[ -z $want || $want == "$N" ]] || die "$DIR was made with $N replicas, not $want (stop it and use a new DIR)"
    anything_running && running=1
    if ((!running)) && ! all_ports_free; then pick_ports; fi
  else
    N=${want:-2}
    pick_ports
  fi
  if [[ ! -s $PWFILE ]]; then
    (umask 077; od -An -tx1 -N16 /dev/urandom | tr -d ' \n' >"$PWFILE.tmp")
    mv -f "$PWFILE.tmp" "$PWFILE"
  fi
  chmod 600 "$PWFILE"

  for attempt in 1 2 3 4 5; do
    save_ports
    rc=0; zk_launch || rc=$?
    if ((rc == 2)); then
      ((running)) && die_port "ZooKeeper's saved port $ZK_PORT is taken and replicas already run with it in their config"
      ((attempt < 5)) || die_port "ZooKeeper: port taken on 5 attempts"
      pick_ports; continue
    fi
    ((rc == 0)) || exit 1
    rc=0; start_replicas || rc=$?
    if ((rc == 2)); then
      ((running)) && die_port "a replica's saved port is taken (see above); a running cluster cannot move"
      ((attempt < 5)) || die_port "replicas: a port was taken on 5 attempts"
      echo "$me: a port was taken between choice and bind; trying new ports" >&2
      stop_all >/dev/null || true
      pick_ports; continue
    fi
    ((rc == 0)) || die "a replica did not start (its output is above; logs in $DIR/r<i>/log)"
    break
  done
  for ((i = 1; i <= N; i++)); do wait_replica_ready "$i" || exit 1; done
  write_env
  echo "$me: cluster $CLUSTER_NAME up in $DIR: ZooKeeper 127.0.0.1:$ZK_PORT, $N replicas (http" \
       "$(for ((i = 1; i <= N; i++)); do printf '%s ' "${HTTP_PORT[i]}"; done | sed 's/ $//'))," \
       "$(($(now_ms) - t0)) ms"
}

proc_state() {  # R/S/D/T/Z … of the first pid, "" if none
  [[ -n ${1:-} ]] || return 0
  awk '{ sub(/^.*\) /, ""); print substr($0, 1, 1) }' "/proc/$1/stat" 2>/dev/null || true
}

do_status() {
  local i ok=0 st pid v
  need_layout
  pid=$(zk_pids | head -n1)
  if [[ -n $pid && $(zk_ask ruok) == imok ]]; then
    echo "zookeeper  127.0.0.1:$ZK_PORT  running (pid $pid)"
  elif [[ -n $pid ]]; then
    echo "zookeeper  127.0.0.1:$ZK_PORT  not answering (pid $pid, state $(proc_state "$pid"))"; ok=1
  else
    echo "zookeeper  127.0.0.1:$ZK_PORT  down"; ok=1
  fi
  for ((i = 1; i <= N; i++)); do
    pid=$(replica_pids "$i" | head -n1)
    if [[ -z $pid ]]; then
      echo "r$i         http 127.0.0.1:${HTTP_PORT[i]}  down"; ok=1
    elif [[ $(proc_state "$pid") == T ]]; then
      echo "r$i         http 127.0.0.1:${HTTP_PORT[i]}  paused (pid $pid)"; ok=1
    elif v=$(ch "$i" "SELECT version()"); then
      echo "r$i         http 127.0.0.1:${HTTP_PORT[i]}  running $v (pid $pid)"
    else
      echo "r$i         http 127.0.0.1:${HTTP_PORT[i]}  not answering (pid $pid)"; ok=1
    fi
  done
  return "$ok"
}

lock() {
  exec 9>"$DIR/.lock"
  flock -w 300 9 || die "timed out waiting for the lock on $DIR/.lock"
}

case $cmd in
  start)
    lock
    do_start "${3:-}"
    ;;
  stop)
    lock
    if stop_all; then echo "$me: stopped the cluster in $DIR"; else echo "$me: nothing running in $DIR"; fi
    ;;
  kill|restart|pause|resume)
    lock
    need_layout
    replica_index "$3"
    case $cmd in
      kill) server_sh "$3" kill ;;
      pause|resume) server_sh "$3" "$cmd" ;;
      restart)
        prepare_replica "$3"
        kill -CONT $(replica_pids "$3") 2>/dev/null || true
        t0=$(now_ms)
        server_sh "$3" restart
        if [[ -n $(zk_pids) ]]; then
          wait_replica_ready "$3" || exit 1
          echo "$me: r$3 sees ZooKeeper and the cluster again ($(($(now_ms) - t0)) ms)"
        else
          echo "$me: ZooKeeper is not running: r$3 answers, its replicated tables stay read-only until zk-start"
        fi
        ;;
    esac
    ;;
  zk-stop|zk-kill)
    lock
    need_layout
    if [[ $cmd == zk-stop ]]; then sig=TERM; else sig=KILL; fi
    if zk_stop "$sig"; then echo "$me: ZooKeeper stopped (SIG$sig)"; else echo "$me: ZooKeeper was not running"; fi
    ;;
  zk-start)
    lock
    need_layout
    t0=$(now_ms)
    rc=0; zk_launch || rc=$?
    ((rc == 2)) && die_port "ZooKeeper's port $ZK_PORT is taken (the replicas' config names it)"
    ((rc == 0)) || exit 1
    echo "$me: ZooKeeper answers on 127.0.0.1:$ZK_PORT ($(($(now_ms) - t0)) ms)"
    ;;
  status)
    do_status
    ;;
  env)
    [[ -s $ENVFILE ]] || die "$ENVFILE not found (run: $me start $DIR)"
    cat "$ENVFILE"
    ;;
esac
