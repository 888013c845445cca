#!/bin/sh
# run.sh -- the analyzer benchmark (make bench-analyzer): time and peak
# memory of `heaptrail report/growth` next to heaptrack_print on
# heaptrack's trace of the same program, and symbolization speed.
# Results: build/bench/analyzer.md (and stdout). docs/BENCHMARKS.md quotes
# them with the machine they ran on.
set -eu
B=build/bench
W=${WORKLOADS:-../shared/workloads}
[ -d "$W" ] || W=/work/shared/workloads
HT=build/heaptrail
out=$B/analyzer.md
mkdir -p $B
: >$out
say() { echo "$*" | tee -a $out; }

# measure LABEL CMD...: "| LABEL | seconds | peak MiB |", median time of 3
# runs (and the peak of that run), output discarded
measure() {
    label=$1
    shift
    for i in 1 2 3; do
        /usr/bin/time -f "%e %M" -o $B/time.$i "$@" >/dev/null 2>$B/stderr.$i ||
            { echo "failed: $*"; cat $B/stderr.$i; exit 1; }
    done
    sort -n $B/time.1 $B/time.2 $B/time.3 | sed -n 2p >$B/time.med
    read -r secs kb <$B/time.med
    say "| $label | $secs | $((kb / 1024)) |"
}

say "### Symbolization (cold: module opened, nothing cached)"
say ""
say '```'
build/bench/symbench 100000 | tee -a $out
build/bench/symbench 100000 libstdc++.so.6 | tee -a $out
say '```'
say ""

say "### 1,048,576 distinct stacks (bench/analyzer/stackgen.c, 25 frames each)"
say ""
rm -f $B/gen.ht $B/heaptrack.gen.*
$HT run -o $B/gen.ht $B/stackgen 20 >/dev/null 2>&1
have_heaptrack=0
if command -v heaptrack >/dev/null && command -v heaptrack_print >/dev/null; then
    heaptrack -o $B/heaptrack.gen $B/stackgen 20 >/dev/null 2>&1 && have_heaptrack=1
fi
say "trace sizes: heaptrail $(stat -c %s $B/gen.ht) bytes$([ $have_heaptrack = 1 ] && echo ", heaptrack $(stat -c %s $B/heaptrack.gen.zst) bytes")"
say ""
say "| command | seconds | peak MiB |"
say "| --- | ---: | ---: |"
measure "heaptrail report (text, top 20)" $HT report --no-progress $B/gen.ht
measure "heaptrail report --by function" $HT report --no-progress --by function $B/gen.ht
measure "heaptrail report --format html" $HT report --no-progress --format html $B/gen.ht
measure "heaptrail report --format pprof (all stacks)" $HT report --no-progress --format pprof -o $B/gen.pb.gz $B/gen.ht
measure "heaptrail report --format folded (all stacks)" $HT report --no-progress --format folded $B/gen.ht
[ $have_heaptrack = 1 ] && measure "heaptrack_print" heaptrack_print $B/heaptrack.gen.zst
say ""

for wl in sqlite python; do
    if [ $wl = sqlite ]; then
        set -- sqlite3 :memory: -init $W/sqlite-workload.sql .quit
    else
        set -- /usr/bin/python3 $W/python-workload.py
    fi
    say "### $wl workload ($W), snapshots every 50 ms"
    say ""
    rm -f $B/$wl.ht $B/heaptrack.$wl.*
    $HT run --interval 0.05 -o $B/$wl.ht "$@" >/dev/null 2>$B/$wl.run.err || true
    if ! $HT report --no-progress $B/$wl.ht >/dev/null 2>$B/$wl.report.err; then
        say "heaptrail could not read its trace of this run: $(tail -n 1 $B/$wl.report.err)"
        say ""
        continue
    fi
    hp=0
    if command -v heaptrack >/dev/null; then
        heaptrack -o $B/heaptrack.$wl "$@" >/dev/null 2>&1 && hp=1
    fi
    say "snapshots: $(build/tests/tools/trace_dump $B/$wl.ht 2>/dev/null | sed -n 's/.* snaps=\([0-9]*\).*/\1/p' | head -n1)"
    say ""
    say "| command | seconds | peak MiB |"
    say "| --- | ---: | ---: |"
    measure "heaptrail report" $HT report --no-progress $B/$wl.ht
    measure "heaptrail growth" $HT growth --no-progress $B/$wl.ht
    measure "heaptrail report --format html" $HT report --no-progress --format html $B/$wl.ht
    [ $hp = 1 ] && measure "heaptrack_print" heaptrack_print $B/heaptrack.$wl.zst
    say ""
done
echo "results: $out"
