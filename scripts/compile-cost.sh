#!/usr/bin/env bash
# What a file using chstate over HTTP costs to compile, against its floor,
# measured in the same run (issue 9, item 6). Compiles, interleaved and in a
# rotating order, N times each (medians reported):
#   http_store    benchmarks/compile_cost/http_store.cpp: store.get/store.set
#                 on http_state_store (the README's HTTP store), header-only
#                 (chstate's default)
#   beast_client  benchmarks/compile_cost/beast_client.cpp: a hand-written
#                 synchronous Boost.Beast client POSTing the same two
#                 statements (beast::tcp_stream, http::request/response), no
#                 chstate
#   separate      http_store.cpp with CHSTATE_SEPARATE_COMPILATION, the
#                 library's heavy code compiled once elsewhere (<chstate/src.hpp>,
#                 compiled and timed once; the two objects are then linked,
#                 so the scheme is shown to work, not only to compile)
#   baseline      (--against REV) http_store.cpp header-only against REV's
#                 include/ (git archive), to show what a change saved
# and with --steps, what each part of separate compilation saves:
#   separate_config_inline  as separate, but the configuration parsing
#                 (Boost.URL: detail/config/*.ipp) compiled in the file
#                 again (-include), so only the HTTP transport is compiled once
#   separate_asio as separate, plus BOOST_ASIO_SEPARATE_COMPILATION (Asio
#                 compiled once too: <boost/asio/impl/src.hpp>)
#   beast_client_asio  beast_client.cpp with BOOST_ASIO_SEPARATE_COMPILATION
# Flags: CMake's Release build, -O3 -DNDEBUG -std=c++20, the compiler the
# build uses (c++, or $CXX). Wall seconds, CPU seconds (user + system) and
# peak RSS (/usr/bin/time -f %M) of each compiler run. Prints one line,
#   compile-cost: http_store=12.3s (1.2 GiB) beast_client=6.1s (0.5 GiB) ratio=2.02 [separate: 5.0s (0.6 GiB) ratio=0.82; src.hpp once: 30.1s] cpu: ratio=1.95 separate=0.80
# ratio = median wall time / beast_client's; cpu: the same with CPU
# seconds. On a shared machine the interleaving keeps the wall ratios
# roughly fair; the CPU ratios move much less with the load.
#
# Usage: scripts/compile-cost.sh [-n REPETITIONS] [--against REV] [--steps]   (default 3)
# Needs what chstate::http needs (Boost ≥ 1.81 with JSON and URL, OpenSSL).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
me=compile-cost
die() { echo "$me: error: $*" >&2; exit 1; }

reps=3
against=
steps=0
while (($#)); do
  case $1 in
    -n) reps=${2:-}; shift 2 ;;
    --against) against=${2:-}; shift 2 ;;
    --steps) steps=1; shift ;;
    -h|--help) sed -n '2,37p' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (usage: scripts/compile-cost.sh [-n REPETITIONS] [--against REV] [--steps])" ;;
  esac
done
[[ $reps =~ ^[0-9]+$ && $reps -ge 1 ]] || die "-n needs a positive number, not '$reps'"
cxx=${CXX:-c++}
command -v "$cxx" >/dev/null || die "$cxx not found"
[[ -x /usr/bin/time ]] || die "/usr/bin/time not found (Debian: apt-get install time)"

flags=(-std=c++20 -O3 -DNDEBUG)
src=benchmarks/compile_cost
work=$(mktemp -d /tmp/chstate-compile-cost.XXXXXX)
trap 'rm -rf "$work"' EXIT

variants=(http_store beast_client separate)
declare -A args
args[http_store]="-Iinclude -c $src/http_store.cpp"
args[beast_client]="-c $src/beast_client.cpp"
args[separate]="-Iinclude -DCHSTATE_SEPARATE_COMPILATION -c $src/http_store.cpp"
if [[ -n $against ]]; then
  git rev-parse --verify -q "$against^{commit}" >/dev/null || die "--against: '$against' is not a commit"
  mkdir -p "$work/baseline"
  git archive "$against" include | tar -x -C "$work/baseline"
  variants+=(baseline)
  args[baseline]="-I$work/baseline/include -c $src/http_store.cpp"
fi
if ((steps)); then
  variants+=(separate_config_inline separate_asio beast_client_asio)
  args[separate_config_inline]="-Iinclude -DCHSTATE_SEPARATE_COMPILATION -include chstate/detail/config/uri.ipp"
  args[separate_config_inline]+=" -include chstate/detail/config/environment.ipp -c $src/http_store.cpp"
  args[separate_asio]="-Iinclude -DCHSTATE_SEPARATE_COMPILATION -DBOOST_ASIO_SEPARATE_COMPILATION -c $src/http_store.cpp"
  args[beast_client_asio]="-DBOOST_ASIO_SEPARATE_COMPILATION -c $src/beast_client.cpp"
fi

# compile NAME: one timed compiler run; appends "seconds kib" to $work/NAME.times.
compile() {
  local name=$1 log=$work/$1.log
  # shellcheck disable=SC2086
  if ! /usr/bin/time -f '%e %M %U %S' -o "$work/$name.time" "$cxx" "${flags[@]}" ${args[$name]} -o "$work/$name.o" >"$log" 2>&1; then
    head -n 20 "$log" >&2
    die "compiling $name failed (command: $cxx ${flags[*]} ${args[$name]})"
  fi
  cat "$work/$name.time" >>"$work/$name.times"
}

# The separately compiled half, once (not part of any file's cost).
/usr/bin/time -f '%e %M %U %S' -o "$work/src.time" "$cxx" "${flags[@]}" -Iinclude -DCHSTATE_SEPARATE_COMPILATION \
  -x c++ -c - -o "$work/src.o" <<<'#include <chstate/src.hpp>' >"$work/src.log" 2>&1 \
  || { head -n 20 "$work/src.log" >&2; die "compiling <chstate/src.hpp> failed"; }

for ((r = 0; r < reps; r++)); do
  n=${#variants[@]}
  for ((i = 0; i < n; i++)); do
    compile "${variants[$(((i + r) % n))]}"
  done
done

# The separate object and src.o must link into a program.
"$cxx" "$work/separate.o" "$work/src.o" -o "$work/separate" -lboost_json -lboost_url -lssl -lcrypto -pthread -ldl \
  >"$work/link.log" 2>&1 || { head -n 20 "$work/link.log" >&2; die "linking the separate variant with src.hpp's object failed"; }

median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
seconds() { awk '{print $1}' "$work/$1.times" | median; }
cpu() { awk '{printf "%.2f\n", $3 + $4}' "$work/$1.times" | median; }
gib() { awk '{print $2}' "$work/$1.times" | median | awk '{printf "%.2f", $1 / 1048576}'; }

floor_s=$(seconds beast_client)
for v in "${variants[@]}"; do
  echo "$me: $v: runs $(awk '{printf "%s%ss", sep, $1; sep=" "}' "$work/$v.times"), median $(seconds "$v")s," \
       "CPU median $(cpu "$v")s, peak RSS $(gib "$v") GiB"
done
read -r src_s src_kib _ <"$work/src.time"
echo "$me: <chstate/src.hpp> once: ${src_s}s, peak RSS $(awk -v k="$src_kib" 'BEGIN {printf "%.2f", k / 1048576}') GiB"
ratio() { awk -v a="$(seconds "$1")" -v b="$floor_s" 'BEGIN {printf "%.2f", a / b}'; }
cpu_ratio() { awk -v a="$(cpu "$1")" -v b="$(cpu beast_client)" 'BEGIN {printf "%.2f", a / b}'; }
line="$me: http_store=$(seconds http_store)s ($(gib http_store) GiB) beast_client=${floor_s}s ($(gib beast_client) GiB)"
line+=" ratio=$(ratio http_store) [separate: $(seconds separate)s ($(gib separate) GiB) ratio=$(ratio separate); src.hpp once: ${src_s}s]"
[[ -n $against ]] && line+=" [baseline $against: $(seconds baseline)s ($(gib baseline) GiB) ratio=$(ratio baseline)]"
line+=" cpu: ratio=$(cpu_ratio http_store) separate=$(cpu_ratio separate)"
[[ -n $against ]] && line+=" baseline=$(cpu_ratio baseline)"
echo "$line"
if ((steps)); then
  echo "$me: steps: separate_config_inline=$(seconds separate_config_inline)s ratio=$(ratio separate_config_inline)" \
       "(cpu $(cpu_ratio separate_config_inline)) separate_asio=$(seconds separate_asio)s ratio=$(ratio separate_asio)" \
       "(cpu $(cpu_ratio separate_asio)) beast_client_asio=$(seconds beast_client_asio)s; separate_asio to" \
       "beast_client_asio: $(awk -v a="$(seconds separate_asio)" -v b="$(seconds beast_client_asio)" \
       'BEGIN {printf "%.2f", a / b}') (cpu $(awk -v a="$(cpu separate_asio)" -v b="$(cpu beast_client_asio)" \
       'BEGIN {printf "%.2f", a / b}'))"
fi
