#!/bin/sh
# agent.sh -- `make bench-agent`: wall time and peak memory of heaptrail,
# heaptrail in sampling mode (--sample 512K), heaptrack, Valgrind memcheck
# and LSan (liblsan preload, fast and full unwinding) against the uninstrumented program, side by side in one run,
# on ../shared/workloads. BENCH_RUNS rounds (default 5; BENCH_SLOW_RUNS, 3,
# for the slow tools), each running every tool once, one after another
# (bench/measure.py): medians, and each tool's ratio is the median of its
# per-round ratios to the uninstrumented run of the same round. Also
# splits heaptrail's own cost with HEAPTRAIL_BENCH_MODE (hooks only,
# capture, capture and intern, bookkeeping only), on allocbench and sqlite3.
# Writes build/bench/agent.md and prints it.
set -u
ROOT=$(pwd)
B=$ROOT/build
WL=${HT_WORKLOADS:-$ROOT/../shared/workloads}
O=$B/bench
RUNS=${BENCH_RUNS:-5}
SLOW=${BENCH_SLOW_RUNS:-3}
mkdir -p "$O/tmp"
cc -O2 -g "$WL/allocbench.c" -o "$O/allocbench" || exit 1
LSAN=$(ls /usr/lib/x86_64-linux-gnu/liblsan.so.0 2>/dev/null)
cd "$O/tmp" || exit 1
cp "$WL/sqlite-workload.sql" "$WL/python-workload.py" .

out=$O/agent.md
{
echo "| workload | tool | wall s (median) | ratio (paired) | CPU s (median) | ratio (paired) | peak RSS MiB | ratio | status |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
} >"$out"

group() { # workload, then NAME RUNS CMD... for each tool, separated by "::"
    w=$1
    shift
    rm -rf "$O/tmp/traces"; mkdir -p "$O/tmp/traces"
    python3 "$ROOT/bench/measure.py" "$w" -- "$@" | tee -a "$out"
}

HTR="$B/heaptrail run --"     # default trace names (pid): one per run
HTS="$B/heaptrail run --sample 512K --"     # sampling mode (README: "Sampling mode")
HK="heaptrack -o $O/tmp/traces/hk"
for w in allocbench sqlite3 python3; do
    case $w in
    allocbench) set -- "$O/allocbench" ;;
    sqlite3) set -- sqlite3 :memory: -init sqlite-workload.sql .quit ;;
    python3) set -- /usr/bin/python3 python-workload.py ;;
    esac
    group $w base "$RUNS" "$@" :: heaptrail "$RUNS" $HTR "$@" :: heaptrail-sample-512K "$RUNS" $HTS "$@" \
        :: heaptrack "$SLOW" $HK "$@" :: memcheck "$SLOW" valgrind --tool=memcheck --leak-check=full -q "$@" \
        :: lsan-fast-unwind "$SLOW" env LD_PRELOAD="$LSAN" LSAN_OPTIONS=exitcode=0 "$@" \
        :: lsan-full-unwind "$SLOW" env LD_PRELOAD="$LSAN" LSAN_OPTIONS=exitcode=0:fast_unwind_on_malloc=0 "$@"
done

# a large live set: python3 with every object through malloc, 3 million
# live blocks at its peak (what the live table's layout is for)
# (the environment is set outside the tool: heaptrail follows no exec by
# default, so `heaptrail run -- env ... python3` would track env alone)
set -- /usr/bin/python3 python-workload.py
E="env PYTHONMALLOC=malloc"
group python3-malloc base "$RUNS" $E "$@" :: heaptrail "$RUNS" $E $HTR "$@" \
    :: heaptrail-sample-512K "$RUNS" $E $HTS "$@" :: heaptrack "$SLOW" $E $HK "$@"

# a JIT runtime: node compressing under JS functions (tests/jit/deflate.js)
set -- node "$ROOT/tests/jit/deflate.js"
group node base "$RUNS" "$@" :: heaptrail "$RUNS" $HTR "$@" :: heaptrack "$SLOW" $HK "$@"

# heaptrail's own share on allocbench and sqlite3: LD_PRELOAD directly, no
# CLI, the configurations run round-robin (bench/split.py). "bookkeeping"
# records every block under one empty stack: the same live table, but one
# hot site record instead of one per stack.
AG="env LD_PRELOAD=$B/libheaptrail-preload.so HEAPTRAIL_CONTROL=0"
for w in allocbench sqlite3; do
    case $w in
    allocbench) cmd="$O/allocbench" ;;
    sqlite3) cmd="sqlite3 :memory: -init sqlite-workload.sql .quit" ;;
    esac
    {
    echo
    echo "| $w, cost split ($RUNS rounds) | CPU s median | ratio (paired) | CPU s min | ratio (min) |"
    echo "| --- | --- | --- | --- | --- |"
    } | tee -a "$out"
    python3 "$ROOT/bench/split.py" "$RUNS" "uninstrumented=$cmd" \
        "agent: hooks only=$AG HEAPTRAIL_BENCH_MODE=hooks $cmd" \
        "agent: hooks+capture=$AG HEAPTRAIL_BENCH_MODE=capture $cmd" \
        "agent: hooks+capture+intern=$AG HEAPTRAIL_BENCH_MODE=intern $cmd" \
        "agent: hooks+bookkeeping=$AG HEAPTRAIL_BENCH_MODE=nocapture $cmd" \
        "agent: full=$AG $cmd" | tee -a "$out"
done
echo
echo "written to $out"

# memory per live block and per distinct stack (bench/memcost.c)
cc -O1 -g "$ROOT/bench/memcost.c" -o "$O/memcost" || exit 1
AGM="env LD_PRELOAD=$B/libheaptrail-preload.so HEAPTRAIL_CONTROL=0"
lb=$("$O/memcost" live 1000000); la=$($AGM "$O/memcost" live 1000000)
sb=$("$O/memcost" stacks 65536); sa=$($AGM "$O/memcost" stacks 65536)
{
echo
echo "| agent memory | without agent KiB | with agent KiB | per unit |"
echo "| --- | --- | --- | --- |"
echo "| 1,000,000 live blocks, one stack | $lb | $la | $(( (la - lb) * 1024 / 1000000 )) bytes per live block |"
echo "| 65,536 distinct stacks, one live block each | $sb | $sa | $(( ((sa - sb) * 1024 - 65536 * (la - lb) * 1024 / 1000000) / 65536 )) bytes per stack (after the live-block cost) |"
} | tee -a "$out"
rm -f "$O"/tmp/heaptrail.*.ht heaptrail.memcost.*.ht

# JS frames named: heaptrail vs heaptrack on node --perf-basic-prof
sh "$ROOT/bench/node-names.sh" | tee -a "$out"

# leak checks while the program runs: the program's pause and the check's
# time (bench/leakpause.c: a spinning thread's longest stop)
cc -O2 -g -I"$ROOT/include" "$ROOT/bench/leakpause.c" -o "$O/leakpause" -L"$B" -lheaptrail -lpthread \
    -Wl,-rpath,"$B" || exit 1
{
echo
echo "| leak check, live blocks | check (ht_leak_check returns) | pause of the other thread |"
echo "| ---: | ---: | ---: |"
for n in 100000 1000000; do
    "$B/heaptrail" run -o "$O/leakpause.ht" -- "$O/leakpause" $n 5 2>/dev/null | tail -n1 |
        sed -n 's/^\([0-9]*\) blocks: check \([0-9.]*\) ms, pause \([0-9.]*\) ms.*/| \1 | \2 ms | \3 ms |/p'
    rm -f "$O/leakpause.ht"
done
} | tee -a "$out"
