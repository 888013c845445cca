#!/bin/sh
# agent.sh -- `make bench-agent`: wall time and peak memory of heaptrail,
# heaptrack, Valgrind memcheck and LSan (liblsan preload, fast and full
# unwinding) against the uninstrumented program, side by side in one run,
# on ../shared/workloads. Medians of BENCH_RUNS runs (default 5; 3 for the
# slow tools). Also splits heaptrail's own cost on allocbench with
# HEAPTRAIL_BENCH_MODE (hooks only, capture only, bookkeeping only).
# Writes build/bench/agent.md and prints it.
set -u
ROOT=$(pwd)
B=$ROOT/build
WL=${HT_WORKLOADS:-$ROOT/../shared/workloads}
O=$B/bench
RUNS=${BENCH_RUNS:-5}
SLOW=${BENCH_SLOW_RUNS:-3}
M="python3 $ROOT/bench/measure.py"
mkdir -p "$O/tmp"
cc -O2 -g "$WL/allocbench.c" -o "$O/allocbench" || exit 1
LSAN=$(ls /usr/lib/x86_64-linux-gnu/liblsan.so.0 2>/dev/null)
cd "$O/tmp" || exit 1
cp "$WL/sqlite-workload.sql" "$WL/python-workload.py" .

out=$O/agent.md
{
echo "| workload | tool | wall s (median) | ratio | peak RSS MiB | ratio | status |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
} >"$out"

row() { # workload tool runs cmd...
    w=$1 tool=$2 n=$3
    shift 3
    rm -rf "$O/tmp/traces"; mkdir -p "$O/tmp/traces"
    set -- $($M "$n" -- "$@")
    wall=$1 rss=$2 st=$3
    if [ "$tool" = base ]; then base_wall=$wall base_rss=$rss; fi
    rw=$(python3 -c "print('%.2fx' % ($wall / $base_wall))")
    rr=$(python3 -c "print('%.2fx' % ($rss / $base_rss))")
    mib=$(python3 -c "print('%.1f' % ($rss / 1024))")
    echo "| $w | $tool | $wall | $rw | $mib | $rr | $st |" | tee -a "$out"
    rm -f "$O"/tmp/heaptrail.*.ht
}

HTR="$B/heaptrail run --"     # default trace names (pid): one per run
for w in allocbench sqlite3 python3; do
    case $w in
    allocbench) set -- "$O/allocbench" ;;
    sqlite3) set -- sqlite3 :memory: -init sqlite-workload.sql .quit ;;
    python3) set -- /usr/bin/python3 python-workload.py ;;
    esac
    row $w base "$RUNS" "$@"
    row $w heaptrail "$RUNS" $HTR "$@"
    row $w heaptrack "$SLOW" heaptrack -o "$O/tmp/traces/hk" "$@"
    row $w memcheck "$SLOW" valgrind --tool=memcheck --leak-check=full -q "$@"
    row $w lsan-fast-unwind "$SLOW" env LD_PRELOAD="$LSAN" LSAN_OPTIONS=exitcode=0 "$@"
    row $w lsan-full-unwind "$SLOW" env LD_PRELOAD="$LSAN" LSAN_OPTIONS=exitcode=0:fast_unwind_on_malloc=0 "$@"
done

# heaptrail's own share on allocbench: LD_PRELOAD directly, no CLI
set -- "$O/allocbench"
AG="env LD_PRELOAD=$B/libheaptrail-preload.so HEAPTRAIL_CONTROL=0 HEAPTRAIL_OUTPUT=$O/tmp/traces/s.ht HEAPTRAIL_OUTPUT_PID=0"
row allocbench base "$RUNS" "$@"
row allocbench "agent: hooks only" "$RUNS" $AG HEAPTRAIL_BENCH_MODE=hooks "$@"
row allocbench "agent: hooks+capture" "$RUNS" $AG HEAPTRAIL_BENCH_MODE=capture "$@"
row allocbench "agent: hooks+bookkeeping" "$RUNS" $AG HEAPTRAIL_BENCH_MODE=nocapture "$@"
row allocbench "agent: full" "$RUNS" $AG "$@"
echo
echo "written to $out"
