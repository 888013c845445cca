#!/bin/sh
# record-stacks.sh -- records the stacks real programs allocate from, with
# bench/stackrec.c, for bench/stackdb_bench.c. Usage:
#   bench/record-stacks.sh BUILD_BENCH_DIR WORKLOADS_DIR
# Writes DIR/stacks/NAME.stream and NAME.unique for sqlite3, python3 (its
# own allocator, as shipped), python3-malloc (PYTHONMALLOC=malloc: every
# object through malloc) and allocbench; skips sets already recorded.
set -eu
dir=$1 wl=$2
out=$dir/stacks
mkdir -p "$out"
pre="$(cd "$dir" && pwd)/stackrec.so"

record() {    # NAME COMMAND...
    name=$1; shift
    [ -s "$out/$name.unique" ] && return 0
    rm -f "$out/$name".*
    echo "record-stacks: $name" >&2
    HT_STACKREC_OUT="$out/$name" LD_PRELOAD="$pre" "$@" >/dev/null
    # one process each; keep the one that recorded the most stacks
    best=$(ls -S "$out/$name".*.unique | head -n 1)
    mv "$best" "$out/$name.unique"
    mv "${best%.unique}.stream" "$out/$name.stream"
    rm -f "$out/$name".[0-9]*
}

record sqlite3 sqlite3 :memory: -init "$wl/sqlite-workload.sql" .quit
record python3 /usr/bin/python3 "$wl/python-workload.py"
PYTHONMALLOC=malloc record python3-malloc /usr/bin/python3 "$wl/python-workload.py"
record allocbench "$dir/allocbench"
