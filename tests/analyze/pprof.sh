#!/bin/sh
# pprof output decoded by an independent parser (the pprof-format npm
# package, pinned in tests/js/package-lock.json and installed under
# build/js by `npm ci` when missing): sample types, values, frames with
# names, files and lines, and the mapping's build-id must equal what the
# JSON report of the same command says (itself checked by tests/cli).
# Checks a leak report, a report by function, a diff (negative values) and
# a report with mmap and custom allocator rows (their kind labels).
set -eu
ADIR=build/tests/analyze
out=build/test-logs/pprof
mkdir -p "$out"
sh tests/js/npm-install
fix=$ADIR/symfix.fix
bid=$(readelf -n build/tests/progs/symfix | sed -n 's/.*Build ID: *//p')
check() {
    name=$1
    shift
    $ADIR/htdrive "$@" --format pprof -o "$out/$name.pb.gz"
    $ADIR/htdrive "$@" --format json -o "$out/$name.json"
    node build/js/check_pprof.mjs "$out/$name.pb.gz" "$out/$name.json" "$bid" /progs/symfix
}
check report report "$fix"
check by_function report --by function "$fix"
check diff diff "$fix:0" "$fix:-1"
# mmap and custom allocator rows labelled by kind (tests/analyze/custom_fixture.awk)
awk -f tests/analyze/custom_fixture.awk "$fix" >"$out/custom.fix"
check custom report "$out/custom.fix"
grep -q '"kind":"custom"' "$out/custom.json"
grep -q '"kind":"mmap"' "$out/custom.json"
# the diff holds a negative change (temporary: -2000 bytes)
grep -q '"bytes":-2000' "$out/diff.json"
echo "pprof: ok"
