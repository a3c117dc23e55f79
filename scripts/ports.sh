# scripts/ports.sh — sourced by clickhouse-server.sh and clickhouse-cluster.sh:
# which loopback TCP ports are taken, and whether processes have exited, read
# from /proc (no ss/netstat/ps needed).

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

# exited PID...: true once every PID has finished exiting — gone, or a zombie
# (Z/X). A process's cmdline reads empty as soon as its memory is released,
# which comes before the kernel closes its sockets: a caller that waited only
# for the cmdline to vanish could still find the port open, or reach a
# kept-alive connection the dying server resets after reading a request.
# And a multi-threaded process's leader shows Z as soon as it has exited
# itself, while its other threads are still tearing down and still hold the
# process's descriptors (they are closed with the last thread): so a zombie
# counts as exited only once its task list holds nothing but the leader.
exited() {
  local pid state tasks
  for pid in "$@"; do
    state=$(awk '/^State:/ { print $2 }' "/proc/$pid/status" 2>/dev/null) || continue
    [[ -z $state || $state == Z || $state == X ]] || return 1
    tasks=$(find "/proc/$pid/task" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
    ((tasks <= 1)) || return 1
  done
}
