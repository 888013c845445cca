#!/bin/sh
# peak.sh -- what was in use at the process's peak (`heaptrail report
# --peak`), against tests/progs/peaky's scripted phases: each site's bytes
# at the peak, in the trace and in the report, mid-run and at exit.
. tests/agent/common.inc
cd "$T"

# site_peak TRACE SNAP FUNCTION: the bytes at the peak of the sites whose
# innermost frame is FUNCTION, in snapshot SNAP
site_peak() { field at_peak "$("$DUMP" "$1" --match "$3" --snapshot "$2")"; }
site_peak_blocks() { field at_peak_blocks "$("$DUMP" "$1" --match "$3" --snapshot "$2")"; }
snap_line() { "$DUMP" "$1" | grep "^snap $2 "; }

for mode in early late; do
    "$HT" run -o $mode.ht "$P/peaky" $mode >out.$mode 2>err.$mode; rc=$?
    expect_eq "$mode: exit status" "$rc" 0
    truth=$(sed -n 's/^TRUTH //p' out.$mode)
    got=$(printf 'one=%s small=%s map=%s two=%s' "$(site_peak $mode.ht 1 phase_one)" \
        "$(site_peak $mode.ht 1 small_helper)" "$(site_peak $mode.ht 1 map_region)" \
        "$(site_peak $mode.ht 1 phase_two)")
    expect_eq "$mode: bytes at the peak per site (exit snapshot)" "$got" "$truth"
    got=$(printf 'one=%s small=%s map=%s two=%s' "$(site_peak_blocks $mode.ht 1 phase_one)" \
        "$(site_peak_blocks $mode.ht 1 small_helper)" "$(site_peak_blocks $mode.ht 1 map_region)" \
        "$(site_peak_blocks $mode.ht 1 phase_two)")
    expect_eq "$mode: blocks at the peak per site (exit snapshot)" "$got" "$(sed -n 's/^TRUTH_BLOCKS //p' out.$mode)"
    # the run's summary names the process's peak, as the exit snapshot holds it
    expect_eq "$mode: the summary's peak" \
        "$(sed -n 's/^heaptrail: .* leaked in .*; peak: \([0-9,]*\) bytes (heap and mappings) at [0-9]*\.[0-9]* s; trace: .*/\1/p' err.$mode | tr -d ,)" \
        "$(field peak_bytes "$(snap_line $mode.ht 1)")"
    # one thread: the sites' bytes at the peak add up to the process's peak
    for s in 0 1; do
        l=$(snap_line $mode.ht $s)
        expect_eq "$mode: snapshot $s records the peak" "$(field has_peak "$l")" 1
        expect_eq "$mode: snapshot $s: sum over sites = process peak" "$(field at_peak "$l")" \
            "$(field peak_bytes "$l")"
    done
    # when: the mid-run snapshot's peak (phase one's) came before it; at
    # exit, early's is still phase one's, late's came after the snapshot
    l0=$(snap_line $mode.ht 0); l1=$(snap_line $mode.ht 1)
    p0=$(field peak_ns "$l0"); t0=$(field time_ns "$l0"); p1=$(field peak_ns "$l1")
    echo "$mode: peak at $p0 ns, snapshot 0 at $t0 ns, final peak at $p1 ns"
    [ "$p0" -gt 0 ] && [ "$p0" -le "$t0" ] && echo "ok: $mode: the peak's time precedes snapshot 0" ||
        fail "$mode: peak_ns $p0 vs snapshot 0 at $t0"
    if [ $mode = early ]; then
        [ "$p1" -le "$t0" ] && echo "ok: early: the final peak is phase one's" || fail "early: final peak_ns $p1 after $t0"
    else
        [ "$p1" -gt "$t0" ] && [ "$p1" -le "$(field time_ns "$l1")" ] && echo "ok: late: the final peak is phase two's" ||
            fail "late: final peak_ns $p1 vs $t0"
    fi
    # the snapshot between the phases: phase one's peak, whatever came later
    got=$(printf 'one=%s map=%s two=%s' "$(site_peak $mode.ht 0 phase_one)" \
        "$(site_peak $mode.ht 0 map_region)" "$(site_peak $mode.ht 0 phase_two)")
    expect_eq "$mode: bytes at the peak so far (mid-run snapshot)" "$got" "one=10485760 map=1048576 two=0"
done

# the report: ranked by bytes at the peak, mappings apart
"$HT" report early.ht --peak >rep 2>rerr; rc=$?
cat rep
expect_eq "report --peak exit status" "$rc" 0
expect_eq "report --peak totals" "$(sed -n 2p rep | sed 's/, at [0-9]*\.[0-9]* s)/, at T s)/')" \
    "10526720 bytes in 80 blocks in use at the peak, from 2 allocation sites (the process's peak, heap and mappings: 11575296 bytes, at T s); anonymous mappings live at the peak: 1048576 bytes in 1 region from 1 site"
expect_eq "report --peak first row" "$(grep '^#1 ' rep)" "#1  10485760 bytes in 40 blocks at the peak (99.6%)"
expect_eq "report --peak first row's function" "$(sed -n '/^#1 /{n;p}' rep | awk '{print $1}')" phase_one
# pprof names the values for what they are: held at the peak, not in use now
"$HT" report early.ht --peak -f pprof -o peak.pb.gz 2>/dev/null
expect_eq "report --peak -f pprof: sample types" \
    "$(gzip -dc peak.pb.gz | grep -ac peak_space) $(gzip -dc peak.pb.gz | grep -ac inuse_space)" "1 0"
expect_eq "report --peak: the mapping's row" "$(grep -c '^#[0-9]*  1048576 bytes in 1 block at the peak (100.0%)  \[mmap\]$' rep)" 1
"$HT" report late.ht --peak -s 0 >rep0 2>&1
expect_eq "report --peak of the mid-run snapshot" "$(sed -n '/^#1 /{n;p}' rep0 | awk '{print $1}')" phase_one
"$HT" report late.ht --peak -f json >rep.json 2>&1
expect_eq "json: mode" "$(grep -c '"mode":"peak"' rep.json)" 1
expect_eq "json: first site" "$(grep -o '{"bytes":[0-9]*,"blocks":[0-9]*,"kind":"heap"' rep.json | head -n1)" \
    '{"bytes":12582912,"blocks":48,"kind":"heap"'
"$HT" report late.ht --peak -f html -o rep.html 2>&1
expect_eq "html: flame graph of bytes at the peak" "$(grep -c 'Flame graph of peak bytes' rep.html)" 1
expect_eq "html: the chart marks the peak" "$(grep -c '<rect id="peak".*<title>the peak: 12627968 bytes (heap and mappings) at ' rep.html)" 1
"$HT" growth --peak late.ht >/dev/null 2>gerr; rc=$?
expect_eq "growth --peak refused" "$rc" 2
expect_eq "growth --peak: why" "$(head -n1 gerr)" "heaptrail growth: --peak is for report and diff"

# diff --peak: what made one run's peak higher than another's (by
# function: the two modes call run() from two call sites of main)
"$HT" diff --peak --by function early.ht late.ht >dif 2>&1; rc=$?
cat dif
expect_eq "diff --peak exit status" "$rc" 0
expect_eq "diff --peak totals" "$(sed -n 2p dif)" \
    "+1052672 bytes, +8 blocks at the peak: 11575296 bytes in 81 blocks before, 12627968 bytes in 89 blocks after (the peaks: 11575296 and 12627968 bytes); 4 stacks changed"
expect_eq "diff --peak rows (change, function)" \
    "$(sed -n '/^#/{s/^#[0-9]*  \([-+0-9]*\) bytes ([0-9]* - [0-9]*), \([-+0-9]*\) blocks\{0,1\} .*at the peak.*/\1 \2/;h;n;s/^ *\([a-z_]*\) .*/\1/;H;x;s/\n/ /;p}' dif | tr '\n' ,)" \
    "+12582912 +48 phase_two,+4096 +1 main,-1048576 -1 map_region,-10485760 -40 phase_one,"
"$HT" diff --peak early.ht late.ht -f json >dif.json 2>&1
expect_eq "diff --peak json" "$(grep -c '"at_peak":true,"bytes_before":11575296,"blocks_before":81,"bytes_after":12627968,"blocks_after":89' dif.json)" 1
"$B/tests/analyze/htdrive" diff --peak "$B/tests/analyze/symfix.fix:0" "$B/tests/analyze/symfix.fix" >/dev/null 2>derr; rc=$?
expect_eq "diff --peak of an old trace: exit status" "$rc" 1

# a trace written before the peak was recorded (a fixture has no PEAK
# records): a clear error, exit status 1
"$B/tests/analyze/htdrive" report --peak "$B/tests/analyze/symfix.fix" >/dev/null 2>oerr; rc=$?
expect_eq "old trace: exit status" "$rc" 1
expect_eq "old trace: error" "$(grep -c 'does not say what was live at the peak' oerr)" 1

# four threads at once: the moment is blurred by updates in flight and
# the peak by unflushed per-thread deltas (< 64 KiB plus one block each),
# so the sum over sites is checked against the peak within 4 x (64 KiB +
# 2 x 256 KiB) rather than exactly
"$HT" run -o thr.ht "$P/peaky" threads >/dev/null 2>&1; rc=$?
expect_eq "threads: exit status" "$rc" 0
l=$(snap_line thr.ht 0)
sum=$(field at_peak "$l"); peak=$(field peak_bytes "$l")
d=$((sum - peak)); [ $d -lt 0 ] && d=$((-d))
echo "threads: at the peak $sum, peak $peak"
[ "$d" -le $((4 * (64 + 512) * 1024)) ] && echo "ok: threads: sum within slack of the peak" ||
    fail "threads: sum over sites $sum vs peak $peak"
[ "$peak" -ge $((10 * 1048576)) ] && echo "ok: threads: peak holds a phase one" || fail "threads: peak $peak"
done_
