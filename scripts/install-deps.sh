#!/bin/sh
# install-deps.sh -- installs what heaptrail needs to build and test on a
# Debian machine, and nothing that is already there. Idempotent and quiet
# when everything is present. Usage: scripts/install-deps.sh [build|test|bench]
set -eu
what=${1:-test}

build="gcc make libc6-dev libdw-dev libelf-dev libzstd-dev zlib1g-dev pkg-config"
test="$build g++ clang libunwind-dev gdb sqlite3 python3 binutils git valgrind jq bc libxml2-utils curl debuginfod gpg nodejs npm chromium wine wine64 gcc-mingw-w64-x86-64"
bench="$test heaptrack hyperfine liblsan0 time"

case $what in
build) want=$build ;;
test) want=$test ;;
bench) want=$bench ;;
*) echo "usage: $0 [build|test|bench]" >&2; exit 2 ;;
esac

missing=""
for p in $want; do
    # some nodejs builds (nodesource's) carry npm themselves and conflict
    # with Debian's npm package: what matters is the command
    [ "$p" = npm ] && command -v npm >/dev/null 2>&1 && continue
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
        missing="$missing $p"
done
[ -z "$missing" ] && exit 0

echo "install-deps: installing$missing" >&2
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >/dev/null
# shellcheck disable=SC2086
$sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null
