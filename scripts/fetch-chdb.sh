#!/usr/bin/env bash
# Make the chDB engine (libchdb.so from npm @chdb/lib-linux-x64-gnu) available.
# Installed as chstate-fetch-chdb by `cmake --install` and `meson install`.
#
# Usage: scripts/fetch-chdb.sh [--dest DIR]      (in the repository)
#        chstate-fetch-chdb [--dest DIR]         (installed)
#        scripts/fetch-chdb.sh --print-version   (the version, for other scripts)
#
# Where libchdb.so goes (its absolute path is the last line of stdout;
# progress/status goes to stderr):
#   in the repository  $REPO/.cache/chdb/<version>/libchdb.so, the npm tarball
#                      kept in $REPO/.cache/chdb/ so a rerun never downloads
#                      again (the builds point tests and examples there)
#   installed          ${XDG_CACHE_HOME:-$HOME/.cache}/chstate/chdb/<version>/libchdb.so,
#                      where chstate looks for it by itself (when neither
#                      chdb_options::library nor CHSTATE_CHDB_LIBRARY names
#                      one, after a build's default); the tarball is not kept
#   --dest DIR         DIR/libchdb.so (then point CHSTATE_CHDB_LIBRARY or
#                      chdb_options::library at it)
# An existing libchdb.so is never downloaded again.
set -euo pipefail

# The version: CHSTATE_CHDB_VERSION in chstate/transport/chdb.hpp, the one
# place it is named; ../include/ from this script both in the repository
# (scripts/) and installed (PREFIX/bin/).
version_header=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/include/chstate/transport/chdb.hpp
VERSION=$(sed -n 's/^#define CHSTATE_CHDB_VERSION "\(.*\)"$/\1/p' "$version_header" 2>/dev/null || true)
[[ $VERSION =~ ^[0-9]+(\.[0-9]+)+$ ]] || { echo "$(basename "${BASH_SOURCE[0]}"): error: no CHSTATE_CHDB_VERSION in $version_header (got '$VERSION')" >&2; exit 1; }
PKG=@chdb/lib-linux-x64-gnu
TGZ_NAME=chdb-lib-linux-x64-gnu-$VERSION.tgz

me=$(basename "${BASH_SOURCE[0]}")
die() { echo "$me: error: $*" >&2; exit 1; }
usage() {
  cat <<USAGE
usage: $me [--dest DIR | --print-version]

Downloads chDB $VERSION's libchdb.so (npm package $PKG, ~166 MB, with npm)
for chstate's embedded engine, unless it is already there, and prints its
absolute path as the last line of stdout.

  (no option)  ${XDG_CACHE_HOME:-\$HOME/.cache}/chstate/chdb/$VERSION/libchdb.so
               (in chstate's repository: .cache/chdb/$VERSION/libchdb.so);
               chstate finds it there without further settings
  --dest DIR   DIR/libchdb.so; point CHSTATE_CHDB_LIBRARY (or
               chdb_options::library) at it
  --print-version
               print the chDB version chstate is built against ($VERSION)
               and exit: the one reader of CHSTATE_CHDB_VERSION for the
               repository's other scripts
  -h, --help   this text
USAGE
}

dest=
while (($#)); do
  case $1 in
    -h|--help) usage; exit 0 ;;
    --print-version) echo "$VERSION"; exit 0 ;;
    --dest) (($# >= 2)) && [[ -n $2 ]] || { usage >&2; exit 2; }; dest=$2; shift 2 ;;
    --dest=*) dest=${1#--dest=}; [[ -n $dest ]] || { usage >&2; exit 2; }; shift ;;
    *) echo "$me: unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done

# In chstate's repository (scripts/fetch-chdb.sh beside include/chstate/):
# the repository's .cache, as the builds expect. Anywhere else: installed.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
REPO=$(cd "$here/.." && pwd -P)
if [[ $me == fetch-chdb.sh && -f $REPO/scripts/fetch-chdb.sh && -f $REPO/include/chstate/chstate.hpp ]]; then
  in_repo=1
  CACHE=$REPO/.cache/chdb
  npm_hint="run scripts/install-deps.sh"
else
  in_repo=0
  cache_home=${XDG_CACHE_HOME:-}
  [[ $cache_home == /* ]] || cache_home=   # XDG: a relative value is ignored
  if [[ -z $cache_home ]]; then
    [[ -n ${HOME:-} ]] || [[ -n $dest ]] || die "neither XDG_CACHE_HOME nor HOME is set; pass --dest DIR"
    cache_home=${HOME:-}/.cache
  fi
  CACHE=$cache_home/chstate/chdb
  npm_hint="Debian: apt-get install npm"
fi

if [[ -n $dest ]]; then
  mkdir -p "$dest" || die "cannot create $dest"
  LIBDIR=$(cd "$dest" && pwd -P)
  LOCKDIR=$LIBDIR
else
  LIBDIR=$CACHE/$VERSION
  LOCKDIR=$CACHE
fi
LIB=$LIBDIR/libchdb.so

if [[ -s $LIB ]]; then
  echo "$me: already present" >&2
  echo "$LIB"
  exit 0
fi

mkdir -p "$LIBDIR" "$LOCKDIR"
# Serialize concurrent runs (e.g. parallel CI steps) on the same cache.
exec 9>"$LOCKDIR/.fetch-chdb.lock"
flock 9 || die "cannot lock $LOCKDIR/.fetch-chdb.lock"
if [[ -s $LIB ]]; then   # another run finished it while we waited
  echo "$me: already present" >&2
  echo "$LIB"
  exit 0
fi

# Leftovers of an interrupted run (we hold the lock, so nobody else uses them).
rm -rf "$LOCKDIR"/.fetch-chdb.tmp.*
tmpdir=$(mktemp -d "$LOCKDIR/.fetch-chdb.tmp.XXXXXX")
trap 'rm -rf "$tmpdir"' EXIT

# The tarball is kept only in the repository's cache.
if ((in_repo)); then
  mkdir -p "$CACHE"
  TGZ=$CACHE/$TGZ_NAME
else
  TGZ=$tmpdir/$TGZ_NAME
fi

download() {
  command -v npm >/dev/null 2>&1 || die "npm not found on PATH ($npm_hint)"
  echo "$me: downloading $PKG@$VERSION with npm pack (~166 MB)..." >&2
  if ! (cd "$tmpdir" && npm pack --silent "$PKG@$VERSION") >"$tmpdir/npm.log" 2>&1; then
    cat "$tmpdir/npm.log" >&2
    die "npm pack $PKG@$VERSION failed"
  fi
  [[ -s $tmpdir/$TGZ_NAME ]] || { cat "$tmpdir/npm.log" >&2; die "npm pack did not produce $TGZ_NAME"; }
  [[ $tmpdir/$TGZ_NAME -ef $TGZ ]] || mv -f "$tmpdir/$TGZ_NAME" "$TGZ"   # same filesystem: atomic
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
  echo "$me: cached tarball is unusable, downloading it again" >&2
  rm -f "$TGZ"
  download
  action=downloaded
  extract || { cat "$tmpdir/tar.log" >&2 || true; die "cannot extract package/libchdb.so from $TGZ"; }
fi

echo "$me: $action $PKG@$VERSION -> $LIB" >&2
echo "$LIB"
