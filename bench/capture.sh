#!/bin/sh
# capture.sh -- `make bench-capture`: stack capture cost side by side.
#  1. bench/capture_bench.c built without and with frame pointers: ns per
#     call and per frame for ht_capture, a bare frame-pointer walk,
#     libunwind, glibc backtrace() and libgcc's _Unwind_Backtrace, on a
#     repeated and a varied call path, depths 10/30/100; then the hashes.
#  2. Through JIT code: bench/jit_bench.c, 32-frame stacks of which 0, 8
#     or 16 frames are JIT code registered three ways (ht_register_code,
#     ht_register_unwind, __register_frame), ht_capture and libunwind.
#  3. Inside real programs: build/tests/libagree.so preloaded into sqlite3
#     and python3 (the reference workloads) times one capture at every
#     malloc/calloc/realloc, for ht_capture and for libunwind, alternating
#     runs; the median TSC ticks per capture of 5 runs each.
set -eu
cd "$(dirname "$0")/.."
rounds=${ROUNDS:-7}
echo "== capture_bench, code without frame pointers (the Debian default)"
build/bench/capture_bench_nofp "$rounds"
echo
echo "== capture_bench, code with frame pointers"
build/bench/capture_bench_fp "$rounds"
echo
echo "== through JIT frames (bench/jit_bench.c)"
build/bench/jit_bench "$rounds"
echo
echo "== inside real programs: TSC ticks per capture at every allocation (median of 5)"
work=../shared/workloads
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for prog in sqlite3 python3; do
    for m in ht_capture libunwind; do : >"$tmp/$prog.$m"; done
    for i in 1 2 3 4 5; do
        for m in ht_capture libunwind; do
            t=1; [ $m = libunwind ] && t=libunwind
            if [ $prog = sqlite3 ]; then
                AGREE_TIME=$t AGREE_OUT=$tmp/out LD_PRELOAD=$PWD/build/tests/libagree.so \
                    sqlite3 :memory: -init $work/sqlite-workload.sql .quit >/dev/null 2>&1
            else
                AGREE_TIME=$t AGREE_OUT=$tmp/out PYTHONMALLOC=malloc LD_PRELOAD=$PWD/build/tests/libagree.so \
                    /usr/bin/python3 $work/python-workload.py >/dev/null 2>&1
            fi
            cat "$tmp/out" >>"$tmp/$prog.$m"
        done
    done
    for m in ht_capture libunwind; do
        # captures N frames F cycles_per_capture C cycles_per_frame P
        sort -n -k6 "$tmp/$prog.$m" | sed -n 3p | awk -v p=$prog -v m=$m \
            '{ printf "%-8s %-11s %9d captures %5.1f frames/capture %7.1f ticks/capture %6.2f ticks/frame\n", p, m, $2, $4/$2, $6, $8 }'
    done
done
echo "(TSC: $(grep -m1 'cpu MHz' /proc/cpuinfo | sed 's/.*: //') MHz)"
