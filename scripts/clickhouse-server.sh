#!/usr/bin/env bash
# Run Debian's clickhouse-server (18.16) as a private test instance in DIR.
#
# Usage: scripts/clickhouse-server.sh start|stop|restart|kill|pause|resume|status|env DIR
#   start    copy+rewrite config into DIR, pick free 127.0.0.1 ports, make a
#            throwaway CA and a server certificate (DIR/tls, kept), start the
#            server in the background, wait until it answers SELECT version()
#            over HTTP and HTTPS (120 s at most), write DIR/env. A running
#            instance is left alone; an existing DIR keeps its data, password,
#            certificates and (if still free) ports.
#   stop     TERM the server (KILL after 10 s); fine if it is not running.
#   restart  stop, then start again on the SAME ports with the same password.
#   kill     SIGKILL the server (no shutdown, no flush: a crash) and wait until
#            it is gone; `restart` (or `start`) brings it back. Fault tests.
#   pause    SIGSTOP the server: connections stay open, nothing answers.
#   resume   SIGCONT a paused server.
#   status   exit 0 if the server runs and answers, 1 otherwise.
#   env      print DIR/env (shell exports for the tests; never the password).
#
# Files in DIR: config.xml users.xml metrika.xml password(0600) env ports
#   clickhouse-server.pid data/ log/{clickhouse-server.log,.err.log,stdout.log}
#   tls/{ca.pem,ca.key,server.pem,server.key} (keys 0600)
# Extra server config can be dropped in DIR/config.d/*.xml (read by the server).
#
# Fixed ports (for scripts/clickhouse-cluster.sh, whose config.d names every
# replica's ports before any server starts): with
#   CHSTATE_SERVER_PORTS="HTTP TCP INTERSERVER HTTPS"
# in the environment, start/restart use exactly these ports and never pick
# others; if one of them is taken (before the launch, or the server's bind
# fails with "Address already in use") the script exits with code 3.
# Without the variable nothing changes: ports are picked (and re-picked on a
# lost race) as described above, and errors exit with code 1.
#
# HTTPS: the server also listens on 127.0.0.1:HTTPS_PORT with tls/server.pem,
# an EC P-256 certificate signed by the throwaway CA tls/ca.pem (made here with
# the openssl command, valid 30 days, renewed when it has less than a day left)
# whose subjectAltName is DNS:localhost ONLY: a client that trusts ca.pem and
# connects to "localhost" verifies it; one that connects to "127.0.0.1"
# reaches the very same server and chain but must refuse the name (no IP in
# the certificate), which is how the tests check host-name verification.
# DIR/env gives CHSTATE_TEST_HTTPS_HOST (localhost), CHSTATE_TEST_HTTPS_PORT
# and CHSTATE_TEST_CA_FILE (tls/ca.pem).
set -euo pipefail

BIN=${CLICKHOUSE_SERVER_BIN:-/usr/sbin/clickhouse-server}
ETC=/etc/clickhouse-server
USER_NAME=chstate
START_TIMEOUT=${CHSTATE_SERVER_START_TIMEOUT:-120}
STOP_TIMEOUT=10

me=clickhouse-server.sh
die() { echo "$me: error: $*" >&2; exit 1; }
EXIT_PORT_TAKEN=3   # only with CHSTATE_SERVER_PORTS (see above)
die_port() { echo "$me: error: $*" >&2; exit "$EXIT_PORT_TAKEN"; }

# CHSTATE_SERVER_PORTS: four distinct ports, or unset/empty.
ENV_PORTS=()
if [[ -n ${CHSTATE_SERVER_PORTS:-} ]]; then
  read -r -a ENV_PORTS <<<"$CHSTATE_SERVER_PORTS"
  ((${#ENV_PORTS[@]} == 4)) || die "CHSTATE_SERVER_PORTS must be 4 ports (http tcp interserver https), not '$CHSTATE_SERVER_PORTS'"
  for p in "${ENV_PORTS[@]}"; do
    [[ $p =~ ^[0-9]+$ ]] && ((p > 0 && p < 65536)) || die "CHSTATE_SERVER_PORTS: '$p' is not a port"
  done
  [[ $(printf '%s\n' "${ENV_PORTS[@]}" | sort -u | wc -l) == 4 ]] || die "CHSTATE_SERVER_PORTS: the 4 ports must differ"
fi
usage() { echo "usage: $me start|stop|restart|kill|pause|resume|status|env DIR" >&2; exit 2; }

(($# == 2)) || usage
cmd=$1
case $cmd in start|stop|restart|kill|pause|resume|status|env) ;; *) usage ;; esac
[[ -n $2 ]] || usage

# The directory goes into XML and sed expressions: keep it to a safe alphabet.
[[ $2 =~ ^[A-Za-z0-9._/+@:-]+$ ]] \
  || die "DIR '$2' may only contain letters, digits and . _ / + @ : -"

if [[ $cmd != start && $cmd != restart ]]; then
  [[ -d $2 ]] || { [[ $cmd == stop ]] && { echo "$me: $2 does not exist; nothing to stop"; exit 0; }
                   die "$2 does not exist (run: $me start $2)"; }
fi
mkdir -p "$2"
DIR=$(cd "$2" && pwd -P)

PIDFILE=$DIR/clickhouse-server.pid
PWFILE=$DIR/password
PORTSFILE=$DIR/ports
ENVFILE=$DIR/env
LOGDIR=$DIR/log
DATADIR=$DIR/data
TLSDIR=$DIR/tls
HTTPS_HOST=localhost   # the only name in the server certificate

now_ms() { local t; t=$(date +%s%N); echo $((t / 1000000)); }

# --- process handling -------------------------------------------------------

# Our server's command line contains exactly this argument. The pattern is fed
# to grep through a file so grep's own command line never matches it.
pattern_file() { printf -- '--config-file=%s/config.xml\n' "$DIR"; }

# Is PID a clickhouse-server started with this DIR's config?
is_our_server() {
  local pid=$1
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  grep -qsaF -f <(pattern_file) "/proc/$pid/cmdline"
}

# PIDs of our server: found by a scan of /proc for the exact --config-file of
# this DIR (so a lost or stale pid file does not matter).
server_pids() {
  local f pid
  { grep -lsaF -f <(pattern_file) /proc/[0-9]*/cmdline || true; } | while read -r f; do
    pid=${f#/proc/}; pid=${pid%/cmdline}
    [[ $pid == "$BASHPID" ]] || echo "$pid"
  done
}

stop_server() {
  local -a pids all; local deadline
  mapfile -t pids < <(server_pids)
  if ((${#pids[@]} == 0)); then
    rm -f "$PIDFILE"
    return 1
  fi
  all=("${pids[@]}")
  kill -TERM "${pids[@]}" 2>/dev/null || true
  deadline=$(($(now_ms) + STOP_TIMEOUT * 1000))
  while (($(now_ms) < deadline)); do
    mapfile -t pids < <(server_pids)
    ((${#pids[@]} == 0)) && break
    sleep 0.1
  done
  if ((${#pids[@]} > 0)); then
    echo "$me: server did not stop within ${STOP_TIMEOUT}s after TERM; sending KILL" >&2
    kill -KILL "${pids[@]}" 2>/dev/null || true
    deadline=$(($(now_ms) + 5000))
    while (($(now_ms) < deadline)); do
      mapfile -t pids < <(server_pids)
      ((${#pids[@]} == 0)) && break
      sleep 0.1
    done
    ((${#pids[@]} == 0)) || die "server pid(s) ${pids[*]} still alive after KILL"
  fi
  deadline=$(($(now_ms) + 5000))
  until exited "${all[@]}"; do # its sockets closed too: the port is free for a restart
    (($(now_ms) < deadline)) || die "server pid(s) ${all[*]} have not finished exiting"
    sleep 0.05
  done
  rm -f "$PIDFILE"
  return 0
}

# --- HTTP -------------------------------------------------------------------

# query_version PORT [https] -> prints the version, returns non-zero if no
# answer. With https: over TLS to localhost (pinned to 127.0.0.1), verifying
# the certificate against the test CA only.
# The password goes to curl through a config on stdin, never on a command line.
query_version() {
  local port=$1 pw
  local -a url=("http://127.0.0.1:$port/")
  if [[ ${2:-} == https ]]; then
    url=(--cacert "$TLSDIR/ca.pem" --capath /nonexistent --resolve "$HTTPS_HOST:$port:127.0.0.1"
         "https://$HTTPS_HOST:$port/")
  fi
  pw=$(<"$PWFILE")
  printf 'user = "%s:%s"\n' "$USER_NAME" "$pw" \
    | curl -sf --max-time 2 -K - --data-binary 'SELECT version()' "${url[@]}" 2>/dev/null
}

# --- ports ------------------------------------------------------------------

# used_ports, port_is_free
source "$(dirname "${BASH_SOURCE[0]}")/ports.sh"

# Four distinct free ports in 20000-31999 (below Linux's ephemeral range).
pick_ports() {
  local used p tries=0
  local -a picked=()
  used=" $(used_ports | tr '\n' ' ') "
  while ((${#picked[@]} < 4)); do
    ((++tries < 1000)) || die "could not find 4 free ports in 20000-31999"
    p=$((20000 + (RANDOM * 32768 + RANDOM) % 12000))
    [[ $used == *" $p "* ]] && continue
    [[ " ${picked[*]} " == *" $p "* ]] && continue
    picked+=("$p")
  done
  HTTP_PORT=${picked[0]} TCP_PORT=${picked[1]} INTERSERVER_PORT=${picked[2]} HTTPS_PORT=${picked[3]}
}

load_ports() {
  [[ -s $PORTSFILE ]] || return 1
  HTTP_PORT=$(sed -n 's/^HTTP_PORT=\([0-9]*\)$/\1/p' "$PORTSFILE")
  TCP_PORT=$(sed -n 's/^TCP_PORT=\([0-9]*\)$/\1/p' "$PORTSFILE")
  INTERSERVER_PORT=$(sed -n 's/^INTERSERVER_PORT=\([0-9]*\)$/\1/p' "$PORTSFILE")
  HTTPS_PORT=$(sed -n 's/^HTTPS_PORT=\([0-9]*\)$/\1/p' "$PORTSFILE")
  # (a DIR from before HTTPS has no HTTPS_PORT: it gets new ports)
  [[ -n $HTTP_PORT && -n $TCP_PORT && -n $INTERSERVER_PORT && -n $HTTPS_PORT ]]
}

# --- TLS --------------------------------------------------------------------

# A throwaway CA and a server certificate for DNS:localhost signed by it, in
# DIR/tls; EC P-256 keys (made in milliseconds). Kept across starts; made
# again when missing or when the server certificate expires within a day.
ensure_certificates() {
  local ca=$TLSDIR/ca.pem ca_key=$TLSDIR/ca.key crt=$TLSDIR/server.pem key=$TLSDIR/server.key ext log serial
  if [[ -s $ca && -s $ca_key && -s $crt && -s $key ]] \
     && openssl x509 -checkend 86400 -noout -in "$crt" >/dev/null 2>&1 \
     && openssl verify -CAfile "$ca" "$crt" >/dev/null 2>&1; then
    return 0
  fi
  mkdir -p "$TLSDIR"
  rm -f "$ca" "$ca_key" "$crt" "$key" "$TLSDIR/server.csr"
  ext=$TLSDIR/server.ext log=$TLSDIR/openssl.log
  printf '%s\n' 'basicConstraints = critical, CA:FALSE' \
    'keyUsage = critical, digitalSignature, keyEncipherment' \
    'extendedKeyUsage = serverAuth' \
    "subjectAltName = DNS:$HTTPS_HOST" \
    'subjectKeyIdentifier = hash' \
    'authorityKeyIdentifier = keyid' >"$ext"
  serial=0x$(od -An -tx1 -N8 /dev/urandom | tr -d ' \n')
  (
    umask 077
    openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
      -keyout "$ca_key" -out "$ca" -days 30 -subj "/CN=chstate throwaway test CA $(date -u +%Y%m%dT%H%M%SZ)" \
      -addext 'basicConstraints = critical, CA:TRUE' -addext 'keyUsage = critical, keyCertSign, cRLSign' &&
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
      -keyout "$key" -out "$TLSDIR/server.csr" -subj "/CN=chstate test server" &&
    openssl x509 -req -in "$TLSDIR/server.csr" -CA "$ca" -CAkey "$ca_key" -set_serial "$serial" \
      -days 30 -extfile "$ext" -out "$crt"
  ) >"$log" 2>&1 || { cat "$log" >&2; die "making the test certificates in $TLSDIR failed"; }
  chmod 644 "$ca" "$crt"
  rm -f "$TLSDIR/server.csr" "$ext" "$log"
}

# --- config -----------------------------------------------------------------

write_config() {
  local src=$ETC/config.xml tmp=$DIR/config.xml.tmp n
  [[ -r $src ]] || die "$src not found (run scripts/install-deps.sh)"
  sed -e "s#/var/lib/clickhouse/#$DATADIR/#g" \
      -e "s#/var/log/clickhouse-server/#$LOGDIR/#g" \
      -e "s#<http_port>[0-9]*</http_port>#<http_port>$HTTP_PORT</http_port>#" \
      -e "s#<tcp_port>[0-9]*</tcp_port>#<tcp_port>$TCP_PORT</tcp_port>#" \
      -e "s#<interserver_http_port>[0-9]*</interserver_http_port>#<interserver_http_port>$INTERSERVER_PORT</interserver_http_port>#" \
      -e "/<https_port>.*<\/https_port>/d" \
      -e "/<tcp_port_secure>.*<\/tcp_port_secure>/d" \
      -e "s#<certificateFile>[^<]*</certificateFile>#<certificateFile>$TLSDIR/server.pem</certificateFile>#" \
      -e "s#<privateKeyFile>[^<]*</privateKeyFile>#<privateKeyFile>$TLSDIR/server.key</privateKeyFile>#" \
      -e "/<dhParamsFile>.*<\/dhParamsFile>/d" \
      -e "/<listen_host>.*<\/listen_host>/d" \
      -e "/<interserver_http_host>.*<\/interserver_http_host>/d" \
      -e "s#<port>9000</port>#<port>$TCP_PORT</port>#g" \
      -e "s#^\([[:space:]]*\)<http_port>\(.*\)\$#\1<http_port>\2\n\1<https_port>$HTTPS_PORT</https_port>\n\1<listen_host>127.0.0.1</listen_host>\n\1<interserver_http_host>127.0.0.1</interserver_http_host>\n\1<include_from>$DIR/metrika.xml</include_from>#" \
      "$src" >"$tmp"
  # Check that every rewrite took (the template may differ on another release).
  ! grep -q -e '/var/lib/clickhouse' -e '/var/log/clickhouse-server' "$tmp" \
    || die "config still mentions /var/lib/clickhouse or /var/log/clickhouse-server"
  ! grep -q '<dhParamsFile>' "$tmp" || die "config still names a dhParamsFile"
  # certificateFile/privateKeyFile: the <server> one only (the template's
  # <client> section has none). No dhParamsFile: the server's TLS library
  # then uses its built-in parameters (and ECDHE needs none).
  for n in "http_port>$HTTP_PORT<" "tcp_port>$TCP_PORT<" "https_port>$HTTPS_PORT<" \
           "interserver_http_port>$INTERSERVER_PORT<" "listen_host>127.0.0.1<" \
           "certificateFile>$TLSDIR/server.pem<" "privateKeyFile>$TLSDIR/server.key<"; do
    [[ $(grep -c "<$n" "$tmp") == 1 ]] || die "rewriting $src failed (<$n not found once)"
  done
  mv -f "$tmp" "$DIR/config.xml"
  # The server insists the include_from file exists. Our own (empty) one keeps a
  # system-wide /etc/metrika.xml out of this private instance.
  [[ -e $DIR/metrika.xml ]] || printf '<?xml version="1.0"?>\n<yandex>\n</yandex>\n' >"$DIR/metrika.xml"
}

write_users() {
  local src=$ETC/users.xml tmp=$DIR/users.xml.tmp hash
  [[ -r $src ]] || die "$src not found (run scripts/install-deps.sh)"
  hash=$(sha256sum <"$PWFILE" | cut -d' ' -f1)
  (
    umask 077
    awk -v user="$USER_NAME" -v hash="$hash" '
      /<\/users>/ && !done {
        print "        <" user ">"
        print "            <password_sha256_hex>" hash "</password_sha256_hex>"
        print "            <networks>"
        print "                <ip>127.0.0.1</ip>"
        print "                <ip>::1</ip>"
        print "            </networks>"
        print "            <profile>default</profile>"
        print "            <quota>default</quota>"
        print "        </" user ">"
        done = 1
      }
      { print }
      END { if (!done) exit 1 }' "$src" >"$tmp"
  ) || die "could not add user $USER_NAME to users.xml (no </users> in $src?)"
  mv -f "$tmp" "$DIR/users.xml"
}

ensure_password() {
  if [[ ! -s $PWFILE ]]; then
    # 32 hex characters, no trailing newline.
    (umask 077; od -An -tx1 -N16 /dev/urandom | tr -d ' \n' >"$PWFILE.tmp")
    mv -f "$PWFILE.tmp" "$PWFILE"
  fi
  chmod 600 "$PWFILE"
}

write_env() {
  {
    printf 'export CHSTATE_TEST_HTTP_HOST=127.0.0.1\n'
    printf 'export CHSTATE_TEST_HTTP_PORT=%s\n' "$HTTP_PORT"
    printf 'export CHSTATE_TEST_HTTP_USER=%s\n' "$USER_NAME"
    printf 'export CHSTATE_TEST_HTTP_PASSWORD_FILE=%s\n' "$PWFILE"
    printf 'export CHSTATE_TEST_TCP_PORT=%s\n' "$TCP_PORT"
    printf 'export CHSTATE_TEST_HTTPS_HOST=%s\n' "$HTTPS_HOST"
    printf 'export CHSTATE_TEST_HTTPS_PORT=%s\n' "$HTTPS_PORT"
    printf 'export CHSTATE_TEST_CA_FILE=%s\n' "$TLSDIR/ca.pem"
    printf 'export CHSTATE_TEST_SERVER_DIR=%s\n' "$DIR"
  } >"$ENVFILE.tmp"
  mv -f "$ENVFILE.tmp" "$ENVFILE"
}

show_logs() {
  local f
  for f in "$LOGDIR/clickhouse-server.err.log" "$LOGDIR/stdout.log"; do
    if [[ -s $f ]]; then
      echo "---- tail of $f ----" >&2
      tail -n 25 "$f" >&2
    fi
  done
}

# launch_and_wait: 0 = answering, 1 = failed, 2 = failed because a port was taken.
launch_and_wait() {
  local pid deadline
  write_config
  write_users
  mkdir -p "$DATADIR" "$LOGDIR"
  : >"$LOGDIR/clickhouse-server.err.log"
  # setsid: own session, so the server survives the caller's terminal/job
  # control; in a script the background child is no group leader, so setsid
  # execs in place and $! is the server's pid.
  # 9>&-: the server must not inherit (and so hold) our lock on DIR/.lock.
  setsid nohup "$BIN" --config-file="$DIR/config.xml" \
    </dev/null >"$LOGDIR/stdout.log" 2>&1 9>&- &
  pid=$!
  disown "$pid"   # no "Killed" job notices from bash; bash still reaps it
  echo "$pid" >"$PIDFILE"
  deadline=$(($(now_ms) + START_TIMEOUT * 1000))
  while (($(now_ms) < deadline)); do
    # Both listeners open together; HTTPS is asked once HTTP answers.
    if VERSION=$(query_version "$HTTP_PORT") && query_version "$HTTPS_PORT" https >/dev/null; then
      is_our_server "$pid" || { echo "$me: port $HTTP_PORT answers but server pid $pid is gone" >&2; return 1; }
      return 0
    fi
    # Not is_our_server: while setsid and nohup exec, the cmdline can read
    # empty for a moment (a false "exited" on a busy machine).
    if exited "$pid"; then
      rm -f "$PIDFILE"
      if grep -qs -e 'Address already in use' "$LOGDIR/clickhouse-server.err.log" "$LOGDIR/stdout.log"; then
        return 2
      fi
      echo "$me: clickhouse-server exited during startup" >&2
      show_logs
      return 1
    fi
    sleep 0.1
  done
  echo "$me: clickhouse-server did not answer 'SELECT version()' on http 127.0.0.1:$HTTP_PORT and" \
       "https $HTTPS_HOST:$HTTPS_PORT (CA $TLSDIR/ca.pem) within ${START_TIMEOUT}s" >&2
  show_logs
  stop_server || true
  return 1
}

do_start() {
  local fixed_ports=$1 verb=$2 t0 rc attempt
  [[ -x $BIN ]] || die "$BIN not found (run scripts/install-deps.sh)"
  command -v curl >/dev/null 2>&1 || die "curl not found (run scripts/install-deps.sh)"
  command -v openssl >/dev/null 2>&1 || die "openssl not found (run scripts/install-deps.sh)"
  t0=$(now_ms)

  if [[ -n $(server_pids) ]]; then
    load_ports || die "server running in $DIR but $PORTSFILE is missing; stop it first"
    if VERSION=$(query_version "$HTTP_PORT"); then
      [[ -s $ENVFILE ]] || write_env
      echo "$me: already running in $DIR (http 127.0.0.1:$HTTP_PORT, https $HTTPS_HOST:$HTTPS_PORT, pid $(server_pids | head -n1))"
      return 0
    fi
    die "a server for $DIR is running but does not answer on 127.0.0.1:$HTTP_PORT; run '$me stop $DIR'"
  fi

  ensure_password
  ensure_certificates
  if ((${#ENV_PORTS[@]} == 4)); then
    fixed_ports=1
    HTTP_PORT=${ENV_PORTS[0]} TCP_PORT=${ENV_PORTS[1]} INTERSERVER_PORT=${ENV_PORTS[2]} HTTPS_PORT=${ENV_PORTS[3]}
    for p in "$HTTP_PORT" "$TCP_PORT" "$INTERSERVER_PORT" "$HTTPS_PORT"; do
      port_is_free "$p" || die_port "port $p (from CHSTATE_SERVER_PORTS) is already in use"
    done
  elif ((fixed_ports)); then
    load_ports || die "no saved ports in $PORTSFILE to restart on"
  elif ! load_ports || ! port_is_free "$HTTP_PORT" || ! port_is_free "$TCP_PORT" \
       || ! port_is_free "$INTERSERVER_PORT" || ! port_is_free "$HTTPS_PORT"; then
    pick_ports
  fi

  for attempt in 1 2 3 4 5; do
    printf 'HTTP_PORT=%s\nTCP_PORT=%s\nINTERSERVER_PORT=%s\nHTTPS_PORT=%s\n' \
      "$HTTP_PORT" "$TCP_PORT" "$INTERSERVER_PORT" "$HTTPS_PORT" >"$PORTSFILE"
    rc=0
    launch_and_wait || rc=$?
    ((rc == 0)) && break
    if ((rc == 2)) && ! ((fixed_ports)) && ((attempt < 5)); then
      pick_ports   # lost a race for a port: try others
      continue
    fi
    if ((rc == 2)); then
      show_logs
      msg="port already in use (http $HTTP_PORT, tcp $TCP_PORT, interserver $INTERSERVER_PORT, https $HTTPS_PORT)"
      ((${#ENV_PORTS[@]} == 4)) && die_port "$msg"
      die "$msg"
    fi
    exit 1
  done

  write_env
  echo "$me: clickhouse-server $VERSION $verb in $DIR (http 127.0.0.1:$HTTP_PORT, https $HTTPS_HOST:$HTTPS_PORT, pid $(<"$PIDFILE"), $(($(now_ms) - t0)) ms)"
}

lock() {
  exec 9>"$DIR/.lock"
  flock -w 120 9 || die "timed out waiting for the lock on $DIR/.lock"
}

case $cmd in
  start)
    lock
    do_start 0 started
    ;;
  restart)
    lock
    stop_server || true
    if load_ports; then do_start 1 restarted; else do_start 0 started; fi
    ;;
  stop)
    lock
    if stop_server; then
      echo "$me: stopped server in $DIR"
    else
      echo "$me: no server running in $DIR"
    fi
    ;;
  kill)
    lock
    mapfile -t pids < <(server_pids)
    ((${#pids[@]} > 0)) || die "no server running in $DIR to kill"
    kill -KILL "${pids[@]}" 2>/dev/null || true
    deadline=$(($(now_ms) + 5000))
    until exited "${pids[@]}"; do # its sockets closed too, not only its memory gone
      (($(now_ms) < deadline)) || die "server pid(s) ${pids[*]} still alive 5 s after KILL"
      sleep 0.05
    done
    rm -f "$PIDFILE"
    echo "$me: killed server in $DIR (pid ${pids[*]})"
    ;;
  pause|resume)
    mapfile -t pids < <(server_pids)
    ((${#pids[@]} > 0)) || die "no server running in $DIR to $cmd"
    if [[ $cmd == pause ]]; then sig=STOP; else sig=CONT; fi
    kill -"$sig" "${pids[@]}"
    echo "$me: sent SIG$sig to the server in $DIR (pid ${pids[*]})"
    ;;
  status)
    if [[ -n $(server_pids) ]] && load_ports && VERSION=$(query_version "$HTTP_PORT"); then
      echo "$me: running in $DIR (clickhouse-server $VERSION, http 127.0.0.1:$HTTP_PORT, https $HTTPS_HOST:$HTTPS_PORT)"
    else
      echo "$me: not running in $DIR"
      exit 1
    fi
    ;;
  env)
    [[ -s $ENVFILE ]] || die "$ENVFILE not found (run: $me start $DIR)"
    cat "$ENVFILE"
    ;;
esac
