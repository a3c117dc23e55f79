#!/usr/bin/env bash
# Install the Debian packages chstate needs to build and test.
# Usage: scripts/install-deps.sh [--example]
#   --example  only what scripts/run-example.sh needs: a compiler, Boost's
#              headers and libraries, and npm (for scripts/fetch-chdb.sh)
# Runs `apt-get update` + `apt-get install` only when something is missing.
set -euo pipefail

die() { echo "install-deps: error: $*" >&2; exit 1; }

example_packages=(g++ libboost1.81-dev libboost-json1.81-dev libboost-url1.81-dev ca-certificates)
packages=(
  g++ cmake ninja-build meson pkg-config
  libboost1.81-dev libboost-json1.81-dev libboost-url1.81-dev
  doctest-dev libssl-dev
  # benchmarks/run (the benchmark suite, benchmarks/suite.cpp): Google Benchmark.
  libbenchmark-dev
  clickhouse-server clickhouse-client
  ca-certificates curl openssl
  # scripts/sanitizers.sh: clang 14, its sanitizer runtimes (only Recommended
  # by clang-14) and llvm-symbolizer (llvm-14) for readable reports.
  clang-14 libclang-rt-14-dev llvm-14
  # scripts/fuzz.sh: libFuzzer (the runtime -fsanitize=fuzzer links is in libclang-rt-14-dev).
  libfuzzer-14-dev
)
case ${1:-} in
  --example) packages=("${example_packages[@]}") ;;
  "") ;;
  -h | --help) sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) die "unknown argument '$1' (usage: scripts/install-deps.sh [--example])" ;;
esac
# nodejs/npm (for scripts/fetch-chdb.sh) only when npm is not already there.
if ! command -v npm >/dev/null 2>&1; then
  packages+=(nodejs npm)
fi

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ $status == "install ok installed" ]] || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages already installed"
  exit 0
fi

SUDO=()
if ((EUID != 0)); then
  command -v sudo >/dev/null 2>&1 || die "not root and sudo not found; missing: ${missing[*]}"
  SUDO=(sudo)
fi

# clickhouse-server's maintainer scripts try to start a service. We never use the
# system service, so forbid service starts during the install (policy-rc.d exit
# 101 = "action forbidden") unless the machine already has its own policy.
policy=/usr/sbin/policy-rc.d
created_policy=0
cleanup() {
  if ((created_policy)); then "${SUDO[@]}" rm -f "$policy"; fi
}
trap cleanup EXIT
if [[ ! -e $policy ]]; then
  printf '#!/bin/sh\nexit 101\n' | "${SUDO[@]}" tee "$policy" >/dev/null
  "${SUDO[@]}" chmod 755 "$policy"
  created_policy=1
fi

log=$(mktemp /tmp/install-deps.XXXXXX.log)
export DEBIAN_FRONTEND=noninteractive
if ! "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update >"$log" 2>&1; then
  tail -n 30 "$log" >&2
  die "apt-get update failed (full log: $log)"
fi
if ! "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
     -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
     "${missing[@]}" >>"$log" 2>&1; then
  tail -n 30 "$log" >&2
  die "apt-get install failed for: ${missing[*]} (full log: $log)"
fi

# Confirm everything really is installed now.
still=()
for p in "${missing[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ $status == "install ok installed" ]] || still+=("$p")
done
((${#still[@]} == 0)) || die "still not installed after apt-get: ${still[*]} (log: $log)"
command -v npm >/dev/null 2>&1 || die "npm is still not on PATH"
rm -f "$log"
echo "install-deps: installed ${missing[*]}"
