#!/usr/bin/env bash
# chstate as a new user gets it: fresh projects outside the repository,
# each linking nothing but what chstate's README tells them to, each building
# and RUNNING the README's main example (examples/01_resumable_pipeline.cpp,
# compiled in place) on the embedded engine:
#   cmake_package     `cmake --install` of the repository's CMake build into a
#                     temporary prefix; tests/consumers/cmake-package does
#                     find_package(chstate) and links chstate::chstate (the
#                     example) and chstate::http (tests/consumers/common/
#                     http_check.cpp; and http_check_separate, the same with
#                     CHSTATE_SEPARATE_COMPILATION and common/chstate_src.cpp,
#                     as the README shows), all with GCC and -Werror. libchdb.so
#                     is found where the installed chstate-fetch-chdb caches it
#                     (a per-user cache made here from the repository's copy),
#                     with CHSTATE_CHDB_LIBRARY unset.
#   add_subdirectory  tests/consumers/add-subdirectory: add_subdirectory() of
#                     a vendored copy of the sources, Clang 14 and -Werror
#   fetch_content     tests/consumers/fetch-content: FetchContent from a
#                     tarball of the sources. It and add_subdirectory: the
#                     engine missing, the error names the sources' fetch
#                     command; after it, the example runs with no variable set
#   meson             tests/consumers/meson: subprojects/chstate -> <repo>,
#                     dependency('chstate'); no variable set
#   pkg_config        g++ and `pkg-config --cflags --libs chstate` against the
#                     CMake install; the object linked again with the Libs of
#                     the chstate.pc a `meson install` writes
#   werror            every public header and every store operation
#                     (tests/consumers/common/every_header.cpp), syntax only,
#                     -Wall -Wextra -Wpedantic -Werror, GCC 12 and Clang 14
# The pages' build lines are taken from the pages at run time
# (tests/readme/docblocks.py, by the id in each block's comment) and run here:
#   using-install       docs/using-chstate.md's install: the configure line as
#                       written (in a scratch folder), the build line as a
#                       dry run (ninja -n: it would compile the tool, no
#                       test), the install line against CMAKE_BUILD_DIR
#   readme-plain-flags  README's plain g++ lines: the embedded one run as
#                       written (/path/to/chstate -> the repository,
#                       my_job.cpp -> the example, plus -o); the HTTP one's
#                       compile part must be the same, and its link flags link
#                       the cmake_package build's http_check object
#   using-pkg-config    docs/using-chstate.md's pkg-config lines: the first
#                       run as written (my_job.cpp -> the example); the second
#                       must be the first for chstate-http, and its libraries
#                       link the http_check object
#   using-fetch-chdb    chstate-fetch-chdb as shown: the path each line's
#                       comment promises (and the engine's version) printed
#   using-fetch-chdb-sources  the sources' fetch command, path/to/chstate ->
#                       each vendored copy; FetchContent's where the comment says
# (cmake-package/CMakeLists.txt also holds the pages' CMake lines verbatim:
# tests/readme/check_snippets.py.)
# http_check (and my_http_job) runs one set/get round trip against
# CHSTATE_TEST_SERVER_DIR's server when that is set (scripts/test.sh sets
# it), otherwise it only builds its store (no request).
#
# Nothing is downloaded: the engine is the repository's own
# .cache/chdb/<version>/libchdb.so (scripts/fetch-chdb.sh; scripts/build.sh
# fetches it). Prints one line,
#   consumers: cmake_package=passed add_subdirectory=passed fetch_content=passed meson=passed pkg_config=passed werror=passed
# ("failed" where one failed, with the tail of its log on stderr) and exits
# non-zero on any failure.
#
# Usage: scripts/check-consumers.sh [CMAKE_BUILD_DIR]
#   CMAKE_BUILD_DIR: a built CMake build of this repository (default build/,
#   what scripts/build.sh makes); it is installed, never rebuilt.
#   CHSTATE_BUILD_JOBS (default 2): with 2 or more, two consumers build at a time.
#   CHSTATE_KEEP_CONSUMERS=1 keeps the temporary folder (builds and logs).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
me=check-consumers
die() { echo "$me: error: $*" >&2; exit 1; }

build=${1:-$repo/build}
[[ -d $build ]] || die "no CMake build in $build (run scripts/build.sh)"
build=$(cd "$build" && pwd -P)
[[ -f $build/cmake_install.cmake ]] || die "$build is not a CMake build of chstate (run scripts/build.sh)"
jobs=${CHSTATE_BUILD_JOBS:-2}

for tool in cmake ninja meson pkg-config g++ clang++-14; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool not found on PATH (run scripts/install-deps.sh)"
done

# The engine's version, read by its one reader (fetch-chdb.sh).
version=$(bash "$repo/scripts/fetch-chdb.sh" --print-version)
chdb=$repo/.cache/chdb/$version/libchdb.so
[[ -s $chdb ]] || die "$chdb not found (run scripts/fetch-chdb.sh; this check downloads nothing)"

work=$(mktemp -d /tmp/chstate-consumers.XXXXXX)
if [[ -n ${CHSTATE_KEEP_CONSUMERS:-} ]]; then
  echo "$me: keeping $work (CHSTATE_KEEP_CONSUMERS)" >&2
else
  trap 'rm -rf "$work"' EXIT
fi
prefix=$work/prefix
results=$work/results
mkdir -p "$results"
# The consumers' own flags: fast to compile, still optimized.
opt=-O1
# What a project with strict warnings builds with (consumer_werror and two of
# the builds below).
werror="-Wall -Wextra -Wpedantic -Werror"

# The test server's settings, as the README's environment variables.
http_env=()
if [[ -n ${CHSTATE_TEST_SERVER_DIR:-} ]]; then
  envfile=$CHSTATE_TEST_SERVER_DIR/env
  [[ -s $envfile ]] || die "CHSTATE_TEST_SERVER_DIR is set but $envfile is missing"
  host=$(sed -n 's/^export CHSTATE_TEST_HTTP_HOST=//p' "$envfile")
  port=$(sed -n 's/^export CHSTATE_TEST_HTTP_PORT=//p' "$envfile")
  user=$(sed -n 's/^export CHSTATE_TEST_HTTP_USER=//p' "$envfile")
  pwfile=$(sed -n 's/^export CHSTATE_TEST_HTTP_PASSWORD_FILE=//p' "$envfile")
  [[ -n $host && -n $port && -n $user && -r $pwfile ]] || die "$envfile lacks host, port, user or password file"
  http_env=(MELTANO_STATE_BACKEND_CLICKHOUSE_HOST="$host" MELTANO_STATE_BACKEND_CLICKHOUSE_PORT="$port"
            MELTANO_STATE_BACKEND_CLICKHOUSE_USER="$user"
            MELTANO_STATE_BACKEND_CLICKHOUSE_PASSWORD="$(<"$pwfile")"
            MELTANO_STATE_BACKEND_CLICKHOUSE_DATABASE=default
            MELTANO_STATE_BACKEND_CLICKHOUSE_SCHEMA=chstate_consumers)
fi

# ---- helpers ---------------------------------------------------------------
# docblock_commands ID: the command lines of the page block with that id.
docblock_commands() { python3 "$repo/tests/readme/docblocks.py" commands "$1"; }
docblock_lines() { python3 "$repo/tests/readme/docblocks.py" block "$1"; }
# Each consumer runs in a subshell with its own log ($work/<name>.log); its
# result goes to $results/<name> (passed/failed). `step` logs the command.
step() { echo "+ $*"; "$@"; }
fail() { echo "FAILED: $*"; return 1; }

# run_example NAME BINARY [ENV...]: the README example, twice: the first run
# copies one batch and bookmarks it, the second resumes from that bookmark.
run_example() {
  local name=$1 bin=$2 out state=$work/$1/state
  shift 2
  out=$(env -u CHSTATE_CHDB_LIBRARY -u MELTANO_STATE_BACKEND_URI "$@" "$bin" --batches 1 "chdb:$state" 2>&1) \
    || { echo "$out"; fail "$bin (first run)"; }
  echo "$out"
  grep -q 'copied orders 1\.\.10' <<<"$out" || fail "first run did not copy orders 1..10"
  grep -q 'stopped after 1 batches at orders.last_id = 10' <<<"$out" || fail "first run did not stop after 1 batch"
  out=$(env -u CHSTATE_CHDB_LIBRARY -u MELTANO_STATE_BACKEND_URI "$@" "$bin" --batches 1 "chdb:$state" 2>&1) \
    || { echo "$out"; fail "$bin (second run)"; }
  echo "$out"
  grep -q 'resuming from bookmark: orders.last_id = 10' <<<"$out" || fail "second run did not resume from the bookmark"
  grep -q 'copied orders 11\.\.20' <<<"$out" || fail "second run did not copy orders 11..20"
}

# run_http_check BINARY ID: build the store from the environment; with a
# test server, one set/get round trip.
run_http_check() {
  local bin=$1 id=$2
  if ((${#http_env[@]})); then
    # (not through `step`: the environment holds the password)
    echo "+ $bin get $id  (the server in $CHSTATE_TEST_SERVER_DIR, as MELTANO_STATE_BACKEND_CLICKHOUSE_*)"
    env "${http_env[@]}" "$bin" get "$id"
  else
    echo "(no CHSTATE_TEST_SERVER_DIR: http_check builds its store only)"
    step env MELTANO_STATE_BACKEND_URI=clickhouse://u:p@localhost:8123/default "$bin"
  fi
}

# copy_project NAME: tests/consumers/NAME -> $work/NAME/src (outside the repository).
copy_project() {
  mkdir -p "$work/$1"
  cp -R "$repo/tests/consumers/$1" "$work/$1/src"
}

# ---- the consumers -----------------------------------------------------------

consumer_cmake_package() {
  [[ -f $work/install.ok ]] || fail "cmake --install failed (see above)"
  copy_project cmake-package
  # "Compiling chstate once": the page's main.cpp and chstate.cpp.
  cp "$repo/tests/consumers/common/http_check.cpp" "$work/cmake-package/src/main.cpp"
  cp "$repo/tests/consumers/common/chstate_src.cpp" "$work/cmake-package/src/chstate.cpp"
  local b=$work/cmake-package/build
  step env CXX=g++ cmake -S "$work/cmake-package/src" -B "$b" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    "-DCMAKE_CXX_FLAGS_RELEASE=$opt -DNDEBUG" "-DCMAKE_CXX_FLAGS=$werror" -DCMAKE_PREFIX_PATH="$prefix" -DCHSTATE_REPO="$repo" \
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
  # The package found must be the one just installed.
  local found
  found=$(sed -n 's/^chstate_DIR:PATH=//p' "$b/CMakeCache.txt")
  [[ $found == "$prefix"/* ]] || fail "find_package(chstate) found $found, not the package in $prefix"
  step cmake --build "$b" -j 1
  # The installed way to get the engine: chstate-fetch-chdb, into a per-user
  # cache (here made from the repository's copy, so nothing is downloaded).
  # docs/using-chstate.md's two lines (block using-fetch-chdb), each run with
  # the installed command and checked against the path its comment promises.
  local xdg=$work/cmake-package/xdg dest=$work/cmake-package/dest got line cmd want
  mkdir -p "$xdg/chstate/chdb/$version" "$dest"
  ln -s "$chdb" "$xdg/chstate/chdb/$version/libchdb.so"
  ln -s "$chdb" "$dest/libchdb.so"
  local fetch_lines=()
  mapfile -t fetch_lines < <(docblock_lines using-fetch-chdb)
  ((${#fetch_lines[@]} == 2)) || fail "docs block using-fetch-chdb: expected 2 lines, got ${#fetch_lines[@]}"
  for line in "${fetch_lines[@]}"; do
    cmd=${line%%#*} want=${line#*# -> }
    want=${want%%;*}
    cmd=${cmd//DIR/$dest} want=${want//DIR/$dest}
    want=${want//'${XDG_CACHE_HOME:-~/.cache}'/$xdg}
    [[ $cmd == chstate-fetch-chdb* ]] || fail "docs block using-fetch-chdb: '$line' is not chstate-fetch-chdb"
    read -ra words <<<"${cmd#chstate-fetch-chdb}"
    echo "+ (docs) $line"
    got=$(XDG_CACHE_HOME=$xdg "$prefix/bin/chstate-fetch-chdb" "${words[@]}" | tail -n 1) || fail "chstate-fetch-chdb ${words[*]} failed"
    [[ $got == "$want" ]] || fail "docs block using-fetch-chdb: '$line' printed '$got', its comment promises '$want' (engine $version)"
  done
  step "$prefix/bin/chstate-fetch-chdb" --help >/dev/null
  # The command-line tool, installed by default (CHSTATE_BUILD_TOOLS).
  if grep -q '^CHSTATE_BUILD_TOOLS:BOOL=ON' "$build/CMakeCache.txt"; then
    step "$prefix/bin/chstate" --help >/dev/null
  fi
  # The library must find the engine there by itself.
  run_example cmake-package "$b/my_job" XDG_CACHE_HOME="$xdg"
  run_http_check "$b/http_check" consumer:cmake-package
  run_http_check "$b/my_http_job" consumer:cmake-package-separate
}

# vendor_chstate DEST: a copy of chstate's sources as a project vendors them
# (no .cache, no builds, no .git): what add_subdirectory and FetchContent see.
vendor_chstate() {
  mkdir -p "$1"
  tar -C "$repo" --exclude=./.cache --exclude='./build*' --exclude=./.git -cf - . | tar -C "$1" -xf -
}

# engine_from_vendored_sources NAME BIN CHSTATE_DIR: a program built from
# chstate's sources at CHSTATE_DIR, with no variable set and no per-user
# cache: without the engine its error names CHSTATE_DIR's fetch command;
# after that command (the engine placed where it caches it, so nothing is
# downloaded) the README's example runs, still with no variable set.
engine_from_vendored_sources() {
  local name=$1 bin=$2 dir=$3 out home=$work/$1/empty-home
  mkdir -p "$home"
  if out=$(env -u CHSTATE_CHDB_LIBRARY -u XDG_CACHE_HOME HOME="$home" "$bin" --batches 1 \
             "chdb:$work/$name/state-none" 2>&1); then
    echo "$out"; fail "the example ran without libchdb.so"
  fi
  echo "$out"
  grep -qF "Run bash $dir/scripts/fetch-chdb.sh" <<<"$out" \
    || fail "the missing-engine error does not name $dir/scripts/fetch-chdb.sh"
  grep -qF "$dir/.cache/chdb/$version/libchdb.so" <<<"$out" || fail "the missing-engine error does not name where it looked"
  mkdir -p "$dir/.cache/chdb/$version"
  ln -s "$chdb" "$dir/.cache/chdb/$version/libchdb.so"
  # docs/using-chstate.md's command (block using-fetch-chdb-sources),
  # path/to/chstate -> this copy; FetchContent's copy where its comment says.
  local got line cmd
  line=$(docblock_lines using-fetch-chdb-sources)
  cmd=${line%%#*}
  [[ $cmd == *path/to/chstate/* ]] || fail "docs block using-fetch-chdb-sources: '$line' names no path/to/chstate"
  if [[ $name == fetch-content ]]; then
    [[ $dir == "$work/fetch-content/${line##*FetchContent: }" ]] \
      || [[ "$dir/scripts/fetch-chdb.sh" == "$work/fetch-content/${line##*FetchContent: }" ]] \
      || fail "docs block using-fetch-chdb-sources: FetchContent's copy is $dir, not ${line##*FetchContent: }"
  fi
  read -ra words <<<"${cmd//path\/to\/chstate/$dir}"
  echo "+ (docs) $line"
  got=$(env -u XDG_CACHE_HOME HOME="$home" "${words[@]}" | tail -n 1) || fail "${words[*]} failed"
  [[ $got == "$dir/.cache/chdb/$version/libchdb.so" ]] || fail "$dir/scripts/fetch-chdb.sh printed '$got'"
  run_example "$name" "$bin" -u XDG_CACHE_HOME HOME="$home"
}

# add_subdirectory of a vendored copy, built with Clang 14 and
# -Wall -Wextra -Wpedantic -Werror (chstate's headers must add no warning).
consumer_add_subdirectory() {
  copy_project add-subdirectory
  local b=$work/add-subdirectory/build vendored=$work/add-subdirectory/src/third_party/chstate
  vendor_chstate "$vendored"
  step env CXX=clang++-14 cmake -S "$work/add-subdirectory/src" -B "$b" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    "-DCMAKE_CXX_FLAGS_RELEASE=$opt -DNDEBUG" "-DCMAKE_CXX_FLAGS=$werror" -DCHSTATE_REPO="$vendored"
  step cmake --build "$b" -j 1 --target resumable_pipeline
  engine_from_vendored_sources add-subdirectory "$b/resumable_pipeline" "$vendored"
}

# FetchContent from a release-style tarball of chstate's sources.
consumer_fetch_content() {
  copy_project fetch-content
  local b=$work/fetch-content/build tarball=$work/fetch-content/chstate.tar.gz
  vendor_chstate "$work/fetch-content/chstate"
  tar -C "$work/fetch-content" -czf "$tarball" chstate
  rm -rf "$work/fetch-content/chstate"
  step cmake -S "$work/fetch-content/src" -B "$b" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    "-DCMAKE_CXX_FLAGS_RELEASE=$opt -DNDEBUG" -DCHSTATE_TARBALL="$tarball"
  step cmake --build "$b" -j 1 --target resumable_pipeline
  engine_from_vendored_sources fetch-content "$b/resumable_pipeline" "$b/_deps/chstate-src"
}

# Every public header and every operation's instantiation, syntax only (the
# front end's warnings; the builds above and below also generate code
# under -Werror: add_subdirectory with Clang, the installed package with GCC).
consumer_werror() {
  local c
  for c in g++ clang++-14; do
    step "$c" -std=c++20 -fsyntax-only $werror -I"$repo/include" "$repo/tests/consumers/common/every_header.cpp"
  done
}

consumer_meson() {
  copy_project meson
  mkdir -p "$work/meson/src/subprojects"
  ln -s "$repo" "$work/meson/src/subprojects/chstate"
  local b=$work/meson/build
  step meson setup "$b" "$work/meson/src" -Dbuildtype=plain "-Dcpp_args=$opt" -Dchstate_repo="$repo"
  step ninja -C "$b" -j 1 resumable_pipeline
  # (the subproject is this repository, whose engine scripts/fetch-chdb.sh
  # fetched: found there, with no variable set)
  local home=$work/meson/empty-home
  mkdir -p "$home"
  run_example meson "$b/resumable_pipeline" -u XDG_CACHE_HOME HOME="$home"
}

consumer_pkg_config() {
  [[ -f $work/install.ok ]] || fail "cmake --install failed (see above)"
  local d=$work/pkg-config pcdir flags libs mflags mlibs
  mkdir -p "$d"
  pcdir=$(dirname "$(find "$prefix" -name chstate.pc | head -n 1)")
  [[ -f $pcdir/chstate.pc && -f $pcdir/chstate-http.pc ]] || fail "no chstate.pc and chstate-http.pc under $prefix"
  flags=$(PKG_CONFIG_PATH=$pcdir pkg-config --cflags chstate) || fail "pkg-config --cflags chstate"
  libs=$(PKG_CONFIG_PATH=$pcdir pkg-config --libs chstate) || fail "pkg-config --libs chstate"
  echo "chstate.pc: cflags '$flags' libs '$libs'"
  local http_libs
  http_libs=$(PKG_CONFIG_PATH=$pcdir pkg-config --libs chstate-http) || fail "pkg-config --libs chstate-http"
  echo "chstate-http.pc: libs '$http_libs'"
  [[ " $http_libs " == *" -lssl "* && " $http_libs " == *" -lboost_json "* ]] \
    || fail "chstate-http's libs lack OpenSSL or chstate's own"
  local http_object example_object
  http_object=$(find "$work/cmake-package/build" -name 'http_check.cpp.o' -path '*/http_check.dir/*' | head -n 1)
  [[ -f $http_object ]] || fail "no http_check object in the cmake_package build"
  example_object=$(find "$work/cmake-package/build" -name '01_resumable_pipeline.cpp.o' -path '*/my_job.dir/*' | head -n 1)
  [[ -f $example_object ]] || fail "no my_job object in the cmake_package build"
  # docs/using-chstate.md's pkg-config lines (block using-pkg-config): the
  # first as written (my_job.cpp -> the example, -o into this folder); the
  # second is the first for chstate-http (compiling the Beast program again
  # would add a minute): its libraries link the http_check object.
  local pc=() words=() line
  mapfile -t pc < <(docblock_commands using-pkg-config)
  ((${#pc[@]} == 2)) || fail "docs block using-pkg-config: expected 2 commands, got ${#pc[@]}"
  [[ ${pc[1]} == "$(sed 's/my_job/my_http_job/g; s/--libs chstate)/--libs chstate-http)/' <<<"${pc[0]}")" ]] \
    || fail "docs block using-pkg-config: '${pc[1]}' is not the first line for chstate-http"
  line=${pc[0]/ my_job.cpp / $repo/examples/01_resumable_pipeline.cpp }
  line=${line/%-o my_job/-o $d/my_job}
  [[ $line != "${pc[0]}" && $line == *" -o $d/my_job" ]] || fail "docs block using-pkg-config: '${pc[0]}' is not 'g++ … my_job.cpp … -o my_job'"
  echo "+ (docs) PKG_CONFIG_PATH=$pcdir $line"
  PKG_CONFIG_PATH=$pcdir bash -c "$line"
  run_example pkg-config "$d/my_job" CHSTATE_CHDB_LIBRARY="$chdb"
  # shellcheck disable=SC2086
  step g++ "$http_object" -o "$d/my_http_job" $(PKG_CONFIG_PATH=$pcdir pkg-config --libs chstate-http)
  run_http_check "$d/my_http_job" consumer:pkg-config-http
  # The README's flags for a plain compiler (block readme-plain-flags): the
  # embedded line as written (/path/to/chstate -> this repository,
  # my_job.cpp -> the example, -o added; the engine from
  # chstate-fetch-chdb --dest above); the HTTP line's compile part must be
  # the embedded line's, and its link flags alone link the http_check object.
  local plain=() compile link
  mapfile -t plain < <(docblock_commands readme-plain-flags)
  ((${#plain[@]} == 2)) || fail "README block readme-plain-flags: expected 2 commands, got ${#plain[@]}"
  [[ ${plain[0]} == *" my_job.cpp "* && ${plain[1]} == *" my_http_job.cpp "* ]] \
    || fail "README block readme-plain-flags: not 'g++ … my_job.cpp …' and 'g++ … my_http_job.cpp …'"
  compile=${plain[0]%% my_job.cpp *}
  [[ ${plain[1]%% my_http_job.cpp *} == "$compile" ]] || fail "README block readme-plain-flags: the two lines compile differently"
  line=${plain[0]//\/path\/to\/chstate/$repo}
  read -ra words <<<"${line/ my_job.cpp / $repo/examples/01_resumable_pipeline.cpp }"
  step "${words[@]}" -o "$d/plain_flags"
  run_example plain-flags "$d/plain_flags" CHSTATE_CHDB_LIBRARY="$work/cmake-package/dest/libchdb.so"
  read -ra link <<<"${plain[1]#* my_http_job.cpp }"
  step g++ "$http_object" -o "$d/plain_flags_http" "${link[@]}"
  run_http_check "$d/plain_flags_http" consumer:plain-flags
  # Meson's install writes its own chstate.pc: the same object links with it.
  local mp=$work/meson-install
  step meson setup "$mp/build" "$repo" -Dtests=false -Dtools=false --prefix "$mp/prefix" | tail -n 3
  step meson install -C "$mp/build" | tail -n 3
  local mpc
  mpc=$(dirname "$(find "$mp/prefix" -name chstate.pc | head -n 1)")
  [[ -f $mpc/chstate.pc && -f $mpc/chstate-http.pc ]] || fail "meson install wrote no chstate.pc and chstate-http.pc"
  mflags=$(PKG_CONFIG_PATH=$mpc pkg-config --cflags chstate) || fail "pkg-config --cflags chstate (Meson's)"
  mlibs=$(PKG_CONFIG_PATH=$mpc pkg-config --libs chstate) || fail "pkg-config --libs chstate (Meson's)"
  echo "Meson's chstate.pc: cflags '$mflags' libs '$mlibs'"
  local inc
  inc=$(PKG_CONFIG_PATH=$mpc pkg-config --variable=includedir chstate)
  [[ -f $inc/chstate/chstate.hpp && " $mflags " == *" -I$inc "* ]] \
    || fail "Meson's chstate.pc Cflags do not point at the installed headers"
  [[ -x $mp/prefix/bin/chstate-fetch-chdb ]] || fail "meson install did not install chstate-fetch-chdb"
  PKG_CONFIG_PATH=$mpc pkg-config --libs chstate-http | grep -q -- -lssl || fail "Meson's chstate-http.pc lacks OpenSSL"
  # shellcheck disable=SC2086
  step g++ "$example_object" -o "$d/resumable_pipeline_meson_pc" $mlibs
}

# run_consumer NAME FUNCTION: runs it, logs to $work/NAME.log, records the result.
# (Not inside an `if` or `||`: there bash would ignore set -e in the subshell.)
run_consumer() {
  local name=$1 fn=$2 t0=$SECONDS rc
  set +e
  ( set -euo pipefail; "$fn" ) >"$work/$name.log" 2>&1
  rc=$?
  set -e
  if ((rc == 0)); then echo passed >"$results/$name"; else echo failed >"$results/$name"; fi
  echo "($name: $((SECONDS - t0)) s)" >>"$work/$name.log"
}

# docs/using-chstate.md's install (block using-install): the configure line
# as written in a scratch folder, the build line as a dry run there (it
# would compile the tool and no test; the tool itself is CMAKE_BUILD_DIR's),
# the install line with build-install -> CMAKE_BUILD_DIR, /usr/local -> a
# temporary prefix.
install_as_documented() {
  local lines=() words=()
  mapfile -t lines < <(docblock_commands using-install)
  ((${#lines[@]} == 3)) || fail "docs block using-install: expected 3 commands, got ${#lines[@]}"
  [[ ${lines[0]} == "cmake -S . -B build-install "* && ${lines[1]} == "cmake --build build-install" &&
     ${lines[2]} == "cmake --install build-install --prefix /usr/local" ]] \
    || fail "docs block using-install: not configure, build and install of build-install: ${lines[*]}"
  read -ra words <<<"${lines[0]}"
  (cd "$repo" && step "${words[@]/build-install/$work/build-install}") || fail "${lines[0]}"
  grep -q '^CHSTATE_BUILD_TESTS:BOOL=OFF' "$work/build-install/CMakeCache.txt" || fail "the configure line did not turn the tests off"
  step cmake --build "$work/build-install" -- -n >"$work/build-install.dry-run"
  grep -q 'Linking CXX executable tools/chstate$' "$work/build-install.dry-run" || fail "the build line would not build the tool"
  ! grep -q 'chstate_tests\|/examples/\|/benchmarks/' "$work/build-install.dry-run" || fail "the build line would build tests, examples or benchmarks"
  read -ra words <<<"${lines[2]}"
  words=("${words[@]/build-install/$build}")
  step "${words[@]/\/usr\/local/$prefix}"
}
t0=$SECONDS
set +e
( set -euo pipefail; install_as_documented ) >"$work/install.log" 2>&1
rc=$?
set -e
if ((rc == 0)); then
  touch "$work/install.ok"
else
  echo "$me: cmake --install $build failed:" >&2
  tail -n 30 "$work/install.log" >&2
fi

# Two lanes of one compile each (Asio and Beast translation units are slow
# and large): the installed package in one, the sources in the other.
lane1() { run_consumer cmake_package consumer_cmake_package; run_consumer pkg_config consumer_pkg_config;
          run_consumer werror consumer_werror; }
lane2() { run_consumer add_subdirectory consumer_add_subdirectory; run_consumer meson consumer_meson;
          run_consumer fetch_content consumer_fetch_content; }
if ((jobs >= 2)); then
  lane1 & p1=$!
  lane2 & p2=$!
  wait "$p1" "$p2" || true
else
  lane1
  lane2
fi

status=0
line="consumers:"
for name in cmake_package add_subdirectory fetch_content meson pkg_config werror; do
  r=$(cat "$results/$name" 2>/dev/null || echo failed)
  line+=" $name=$r"
  if [[ $r != passed ]]; then
    status=1
    echo "---- $name: tail of its log ----" >&2
    tail -n 40 "$work/$name.log" >&2
  fi
done
echo "$line"
echo "($me: $((SECONDS - t0)) s)" >&2
exit "$status"
