# scripts/ports.sh — sourced by clickhouse-server.sh and clickhouse-cluster.sh:
# which loopback TCP ports are taken, read from /proc (no ss/netstat needed).

# Every TCP port some local socket is bound to (any state but TIME_WAIT).
used_ports() {
  local f
  for f in /proc/net/tcp /proc/net/tcp6; do
    [[ -r $f ]] || continue
    awk 'function hex(s,  i, n) { n = 0
           for (i = 1; i <= length(s); i++) n = n * 16 + index("0123456789ABCDEF", toupper(substr(s, i, 1))) - 1
           return n }
         NR > 1 && $4 != "06" { split($2, a, ":"); print hex(a[2]) }' "$f"
  done
}

port_is_free() {
  local port=$1
  ! used_ports | grep -qx "$port"
}
