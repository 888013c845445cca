# longrun.sh -- a trace of many snapshots, as `heaptrail run --interval`
# writes over hours (tests/progs/snapseries: 4,000 sites, 301 snapshots):
# the commands read the sites of only the snapshots they need (growth:
# what changed from one snapshot to the next), so their memory is that
# of a snapshot or two, not of all (the reader before kept every
# snapshot's sites: 154 MiB here, 2.4 GB for 950 snapshots of 20,000
# sites), with the same answers.
. tests/agent/common.inc
cd "$T"

"$HT" run -o s.ht "$P/snapseries" >run.out 2>run.err; rc=$?
expect_eq "snapseries: exit status" "$rc" 0
expect_eq "snapseries: unreachable at exit (the 7 steady sites)" \
    "$(grep -c '^heaptrail: unreachable at exit: 29,900 bytes in 299 blocks from 7 sites (definitely lost)' run.err)" 1

# each snapshot lists only the sites that changed since the one before
# (format version 2): 4,000 sites once, then a few a round. Listing all
# of them every time made this trace 1.9 MB (~1.2 bytes a site a
# snapshot compressed); 67 KB now
size=$(stat -c %s s.ht)
[ "$size" -lt 200000 ] && echo "ok: trace of 301 snapshots: $size bytes" || fail "trace of 301 snapshots: $size bytes (not under 200,000)"

# the reader's selective read against its full read: the kept snapshots'
# sites equal, the others dropped, every snapshot's live figures rebuilt
# from the changes, each node's first snapshot the same
k=$("$DUMP" s.ht --kept)
echo "$k"
expect_eq "kept read: snapshots" "$(field snapshots "$k")" 301
expect_eq "kept read: sites kept (snapshots 1 and -2)" "$(field kept "$k")" 2
expect_eq "kept read: sites dropped" "$(field dropped "$k")" 299
expect_eq "kept read: checks" "$(echo "$k" | grep -c ' ok$')" 1
# 4,000 sites at the first snapshot, then a few a round, not 4,000 a round
ch=$(field changes "$k")
[ "$ch" -ge 4001 ] && [ "$ch" -le 6000 ] && echo "ok: changes listed: $ch" || fail "changes listed: $ch"

# the commands' answers, and their memory (HEAPTRAIL_TIMING's peak RSS):
# 20-21 MiB with the selective read, 154 MiB with every snapshot's sites
peak_mib() { sed -n 's/.*(peak RSS \([0-9]*\) MiB).*/\1/p' "$1" | tail -n1; }
HEAPTRAIL_TIMING=1 "$HT" growth s.ht >growth.out 2>growth.err
expect_eq "growth: the 7 steady sites" "$(grep -c '^7 stacks grew, by 29900 bytes in 299 blocks together$' growth.out)" 1
HEAPTRAIL_TIMING=1 "$HT" report s.ht >report.out 2>report.err
expect_eq "report: the last snapshot" "$(grep -c '^158720 bytes leaked in 4315 blocks from 4022 allocation sites' report.out)" 1
HEAPTRAIL_TIMING=1 "$HT" report -s 1 --in-use s.ht >report1.out 2>report1.err
expect_eq "report -s 1: the second snapshot" "$(grep -c '^128200 bytes in use in 4002 blocks' report1.out)" 1
HEAPTRAIL_TIMING=1 "$HT" diff s.ht:0 s.ht >diff.out 2>diff.err
expect_eq "diff: first to last" \
    "$(grep -c '^+30620 bytes, +314 blocks: 128100 bytes in 4001 blocks before, 158720 bytes in 4315 blocks after' diff.out)" 1
for c in growth report report1 diff; do
    m=$(peak_mib $c.err)
    [ -n "$m" ] && [ "$m" -lt 60 ] && echo "ok: $c: peak RSS $m MiB" || fail "$c: peak RSS '$m' MiB (not under 60)"
done

# a snapshot that could not be written (the file renamed away while the
# program wrote it, and back): the writer's next snapshot lists every site
# afresh, since the reader never saw the one it would list changes to;
# the snapshots after the gap read as those of a run without it
"$HT" run -o a.ht "$P/snapseries" 60 6 >a.out 2>&1
"$HT" run -o b.ht "$P/snapseries" 60 6 "$T/b.ht" >b.out 2>&1; rc=$?
expect_eq "snapseries with a gap: exit status" "$rc" 0
no_seq() { sed -e 's/^snap [0-9]* /snap /' -e 's/^trace .* nodes=/trace nodes=/'; }
"$DUMP" a.ht --all | awk '/^snap / { skip = $2 == 2 } !skip' | no_seq >a.dump
"$DUMP" b.ht --all | no_seq >b.dump
expect_eq "with a gap: snapshots read" "$(grep -c '^snap ' b.dump)" 6
expect_eq "with a gap: the snapshots after it as without" "$(cmp -s a.dump b.dump && echo same)" same
expect_eq "with a gap: not damaged" "$("$DUMP" b.ht | grep -c '^trace .* complete=1 truncated=0')" 1
we=$("$DUMP" b.ht | sed -n 's/^drops .*write_errors=\([0-9]*\).*/\1/p')
[ "${we:-0}" -gt 0 ] && echo "ok: the lost snapshot counted: $we bytes" || fail "write_errors: '$we'"
expect_eq "with a gap: the summary says so" "$(grep -c " $we trace bytes lost" b.out)" 1

done_
