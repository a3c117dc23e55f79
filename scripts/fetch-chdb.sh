#!/usr/bin/env bash
# Make the chDB engine (libchdb.so from npm @chdb/lib-linux-x64-gnu) available.
# Usage: scripts/fetch-chdb.sh
# Result: $REPO/.cache/chdb/<version>/libchdb.so; its absolute path is the last
# line of stdout (progress/status goes to stderr). The npm tarball is kept in
# $REPO/.cache/chdb/ so a rerun never downloads again.
set -euo pipefail

VERSION=26.5.3
PKG=@chdb/lib-linux-x64-gnu
TGZ_NAME=chdb-lib-linux-x64-gnu-$VERSION.tgz

die() { echo "fetch-chdb: error: $*" >&2; exit 1; }

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
CACHE=$REPO/.cache/chdb
TGZ=$CACHE/$TGZ_NAME
LIB=$CACHE/$VERSION/libchdb.so

if [[ -s $LIB ]]; then
  echo "fetch-chdb: already present" >&2
  echo "$LIB"
  exit 0
fi

mkdir -p "$CACHE/$VERSION"
# Serialize concurrent runs (e.g. parallel CI steps) on the same cache.
exec 9>"$CACHE/.lock"
flock 9 || die "cannot lock $CACHE/.lock"
if [[ -s $LIB ]]; then   # another run finished it while we waited
  echo "fetch-chdb: already present" >&2
  echo "$LIB"
  exit 0
fi

# Leftovers of an interrupted run (we hold the lock, so nobody else uses them).
rm -rf "$CACHE"/.tmp.*
tmpdir=$(mktemp -d "$CACHE/.tmp.XXXXXX")
trap 'rm -rf "$tmpdir"' EXIT

download() {
  command -v npm >/dev/null 2>&1 || die "npm not found on PATH (run scripts/install-deps.sh)"
  echo "fetch-chdb: downloading $PKG@$VERSION with npm pack (~166 MB)..." >&2
  if ! (cd "$tmpdir" && npm pack --silent "$PKG@$VERSION") >"$tmpdir/npm.log" 2>&1; then
    cat "$tmpdir/npm.log" >&2
    die "npm pack $PKG@$VERSION failed"
  fi
  [[ -s $tmpdir/$TGZ_NAME ]] || { cat "$tmpdir/npm.log" >&2; die "npm pack did not produce $TGZ_NAME"; }
  mv -f "$tmpdir/$TGZ_NAME" "$TGZ"   # same filesystem: atomic
}

extract() {
  local part=$tmpdir/libchdb.so.part
  rm -f "$part"
  tar -xzf "$TGZ" -O package/libchdb.so >"$part" 2>"$tmpdir/tar.log" || return 1
  [[ -s $part ]] || return 1
  # Must be an ELF shared object.
  [[ $(head -c 4 "$part" | od -An -c | tr -d ' ') == '177ELF' ]] || return 1
  chmod 755 "$part"
  mv -f "$part" "$LIB"
}

action=extracted
if [[ ! -s $TGZ ]]; then
  download
  action=downloaded
fi
if ! extract; then
  if [[ $action == downloaded ]]; then
    cat "$tmpdir/tar.log" >&2 || true
    die "cannot extract package/libchdb.so from freshly downloaded $TGZ"
  fi
  echo "fetch-chdb: cached tarball is unusable, downloading it again" >&2
  rm -f "$TGZ"
  download
  action=downloaded
  extract || { cat "$tmpdir/tar.log" >&2 || true; die "cannot extract package/libchdb.so from $TGZ"; }
fi

echo "fetch-chdb: $action $PKG@$VERSION -> libchdb.so" >&2
echo "$LIB"
