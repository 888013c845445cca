#!/bin/sh
# real_programs.sh -- ht_capture against libunwind inside real Debian
# programs: build/tests/libagree.so is preloaded into sqlite3 and python3
# running the reference workloads, and into node (a non-PIE executable
# with JIT code in its stacks) compressing with zlib, and compares both
# unwinders at their malloc/calloc/realloc calls. Every compared stack
# must agree, and each program must yield at least 10,000 stacks.
set -u
cd "$(dirname "$0")/../.."
agent=$PWD/build/tests/libagree.so
work=../shared/workloads
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail=0

check() {
    name=$1
    shift
    AGREE_OUT=$out/$name AGREE_MAX=30000 LD_PRELOAD=$agent "$@" >/dev/null 2>"$out/$name.err"
    if [ ! -s "$out/$name" ]; then
        echo "$name: no result (exit $?)"; cat "$out/$name.err"; fail=1; return
    fi
    read -r _ stacks _ agree _ frames _ <"$out/$name"
    echo "$name: $agree of $stacks stacks agree ($frames frames)"
    if [ "$stacks" -lt 10000 ] || [ "$agree" -ne "$stacks" ]; then
        fail=1
        cat "$out/$name.err"
    fi
}

check sqlite3 sqlite3 :memory: -init $work/sqlite-workload.sql .quit
# PYTHONMALLOC=malloc: every Python object through malloc, not pymalloc
AGREE_EVERY=3 PYTHONMALLOC=malloc check python3 /usr/bin/python3 $work/python-workload.py
AGREE_EVERY=2 check node node tests/jit/deflate.js
exit $fail
