#!/bin/sh
# fixht (tests/analyze/fixht.c) writes a fixture as a binary trace: the
# real reader must read it as the fixture loader does, REACH's flags,
# POSSIBLE and PEAK records included, or the cases built on it (run_*)
# would test another trace. `heaptrail report` on the binary trace against
# htdrive on the fixture, byte for byte (the trace's name aside), for the
# custom verdict fixture (with possibly lost blocks; and old=1, without the
# flags) and the peak fixture: report, JSON, the leak check at snapshot 5,
# the diff 5 -> 6, --peak
. tests/cli/case.lib
fix=$logdir/binary_fixture.fix
bin=$logdir/binary_fixture.ht
: >"$out.1"
check() {  # check WHAT ARGS... (TRACE in ARGS: the trace)
    what=$1
    shift
    a=$(echo "$*" | sed "s|TRACE|$bin|g")
    b=$(echo "$*" | sed "s|TRACE|$fix|g")
    "$HT" $a 2>&1 | sed "s|$bin|T|g" >"$out.a"
    "$HTDRIVE" $b 2>&1 | sed "s|$fix|T|g" >"$out.b"
    if cmp -s "$out.a" "$out.b"; then echo "$what: $(wc -l <"$out.a") lines as the fixture's"
    else echo "$what differs:"; diff "$out.b" "$out.a"; fi >>"$out.1"
}
for variant in "1 0" "0 1"; do
    set -- $variant
    custom_reach_fixture "$fix" "$1" "$2"
    rm -f "$bin" && $ADIR/fixht "$fix" "$bin" || exit 1
    check "custom verdicts (possible=$1 old=$2): report" report TRACE
    check "custom verdicts (possible=$1 old=$2): json" report --format json TRACE
    check "custom verdicts (possible=$1 old=$2): leak check" report --snapshot 5 TRACE
    check "custom verdicts (possible=$1 old=$2): diff" diff TRACE:5 TRACE:6
done
custom_peak_fixture "$fix"
rm -f "$bin" && $ADIR/fixht "$fix" "$bin" || exit 1
check "peak: report --peak" report --peak TRACE
check "peak: json" report --peak --format json TRACE
mv "$out.1" "$out" && rm -f "$out.a" "$out.b"
compare
